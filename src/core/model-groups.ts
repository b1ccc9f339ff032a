/**
 * ModelGroups — the Router's model names as small integer group ids, and the
 * models each instance slot declares.
 *
 * Why it exists: a fleet serves several models (vLLM LoRA adapters appear as
 * models too) and a request may only go to an instance that serves its model.
 * The routing core compares integers, never strings, so the Router interns a
 * model name into a group id when an instance first declares it and hands the
 * core each instance's group ids (setInstanceGroups) and each request's group
 * (REQUEST_GROUP in the request slab).
 *
 * Ids: 1, 2, … in order of first declaration. They are never freed, so the
 * table is bounded by the distinct models ever declared on this router (at
 * most MAX_GROUPS - 1), and a model keeps its id, and so its sticky pins,
 * while instances stop and start declaring it. Group 0 is reserved: no
 * instance declares it, so its candidates are the wildcard instances. A
 * request naming a model that was never declared gets group 0 for one Map
 * lookup and is not interned: client strings cannot grow the table.
 *
 * Complexity: O(1) per request (one Map lookup); O(models) per declaration.
 */
import { MAX_GROUPS } from './core-router.js';
import { invalidType, invalidValue, rangeError } from './errors.js';

/** REQUEST_GROUP of a request without a model. */
export const GROUP_NONE = -1;
/** REQUEST_GROUP of a model no instance ever declared: the wildcards only. */
export const GROUP_UNDECLARED = 0;

export class ModelGroups {
  private readonly ids = new Map<string, number>();
  /** Per slot: the declared models, sorted and unique; undefined = any model. */
  private readonly bySlot: Array<readonly string[] | undefined> = [];

  /** The group of a request's `model` (validated); GROUP_NONE when it names none. */
  groupOf(model: unknown): number {
    if (model === undefined) return GROUP_NONE;
    if (typeof model !== 'string') throw invalidType('request.model', 'a string', model);
    if (model.length === 0) throw invalidValue('request.model', 'a non-empty string', model);
    return this.ids.get(model) ?? GROUP_UNDECLARED;
  }

  /**
   * Instance `id`'s models list checked (an array of non-empty strings, or undefined), sorted and
   * without duplicates. Interns nothing, so a refused list changes nothing; also refuses a list
   * that would take the table past MAX_GROUPS - 1 distinct models. Errors name `models of "id"`.
   */
  check(id: string, models: unknown): string[] | undefined {
    if (models === undefined) return undefined;
    const of = ` of ${JSON.stringify(id)}`;
    const field = `models${of}`;
    if (!Array.isArray(models)) throw invalidType(field, 'an array of model names (or undefined: any model)', models);
    const unique = new Set<string>();
    models.forEach((model: unknown, k) => {
      const element = `models[${k}]${of}`;
      if (typeof model !== 'string') throw invalidType(element, 'a string', model);
      if (model.length === 0) throw invalidValue(element, 'a non-empty string', model);
      unique.add(model);
    });
    let fresh = 0;
    for (const model of unique) if (!this.ids.has(model)) fresh += 1;
    if (this.ids.size + fresh > MAX_GROUPS - 1) {
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        `${field}: a router interns at most ${MAX_GROUPS - 1} distinct models over its life, ` +
          `and ${this.ids.size} are taken`,
      );
    }
    return [...unique].sort();
  }

  /** Records a slot's checked models, interning new names; returns the core's group ids (null: any). */
  declare(slot: number, models: string[] | undefined): Uint32Array | null {
    this.bySlot[slot] = models;
    if (models === undefined) return null;
    return Uint32Array.from(models, (model) => {
      let id = this.ids.get(model);
      if (id === undefined) {
        id = this.ids.size + 1;
        this.ids.set(model, id);
      }
      return id;
    });
  }

  /** Every interned model and its group id (what another thread's router must adopt to agree). */
  entries(): Array<[string, number]> {
    return [...this.ids];
  }

  /**
   * Takes another router's interning and slots wholesale (a thread attached to a shared core,
   * docs/scale-out.md): group ids must be the core's, so they are copied, never re-interned.
   */
  adopt(entries: ReadonlyArray<readonly [string, number]>, bySlot: ReadonlyArray<readonly string[] | undefined>): void {
    this.ids.clear();
    for (const [model, id] of entries) this.ids.set(model, id);
    this.bySlot.length = 0;
    bySlot.forEach((models, slot) => (this.bySlot[slot] = models));
  }

  /** The slot's instance is gone. */
  forget(slot: number): void {
    this.bySlot[slot] = undefined;
  }

  /** Each slot's declared models; undefined = any model (or no instance). */
  get slots(): ReadonlyArray<readonly string[] | undefined> {
    return this.bySlot;
  }

  /** Every model some instance declares now, sorted. */
  declared(): string[] {
    const all = new Set<string>();
    for (const models of this.bySlot) if (models !== undefined) for (const model of models) all.add(model);
    return [...all].sort();
  }
}
