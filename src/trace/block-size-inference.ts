/**
 * Infers a trace's block size from its lines when nothing states it (no `block_size` field, no
 * `--block-size`). A line with `k` hash ids and `input_length` L fits block size B exactly when
 * ceil(L / B) = k, that is B in [ceil(L / k), floor((L − 1) / (k − 1))] (k ≥ 2), B ≥ L (k = 1),
 * or any B when L = k = 0. The lines read ahead narrow this to one interval; the format's
 * default wins when it lies inside, else the single power of two inside (block sizes in vLLM,
 * SGLang and Mooncake are powers of two), else the single integer. Anything else is refused:
 * an empty interval means the lines disagree, a wide one that the lines cannot tell.
 */
import { TraceFormatError } from './trace-errors.js';

/** The block sizes consistent with one line, as [lo, hi] (hi may be Infinity; lo > hi: none). */
export function fittingBlockSizes(inputLength: number, ids: number): [number, number] {
  if (ids === 0) return inputLength === 0 ? [1, Infinity] : [1, 0];
  if (inputLength === 0) return [1, 0];
  if (ids === 1) return [inputLength, Infinity];
  return [Math.ceil(inputLength / ids), Math.floor((inputLength - 1) / (ids - 1))];
}

export interface BlockSizeDecision {
  size: number;
  /** Set when the size is not the format's default: what was inferred and how to state it. */
  note?: string;
}

const LARGEST_POWER = 2 ** 20;

interface Bound {
  value: number;
  line: number;
  inputLength: number;
  ids: number;
}

export class BlockSizeInference {
  private lo: Bound = { value: 1, line: 0, inputLength: 0, ids: 0 };
  private hi: Bound = { value: Infinity, line: 0, inputLength: 0, ids: 0 };
  private lines = 0;
  private lastLine = 0;

  constructor(private readonly source: string) {}

  /** Narrows the interval with one line; throws as soon as the lines read so far disagree. */
  add(line: number, inputLength: number, ids: number): void {
    const [lo, hi] = fittingBlockSizes(inputLength, ids);
    this.lines++;
    this.lastLine = line;
    if (lo > hi)
      throw new TraceFormatError(
        line,
        'hash_ids',
        `${ids} ids for input_length ${inputLength} fit no block size (ceil(input_length / block size) is never ${ids}); give --block-size B to read the trace with such lines counted as warnings`,
        this.source,
      );
    if (lo > this.lo.value) this.lo = { value: lo, line, inputLength, ids };
    if (hi < this.hi.value) this.hi = { value: hi, line, inputLength, ids };
    if (this.lo.value > this.hi.value) {
      const range = (b: Bound): string => `line ${b.line} (input_length ${b.inputLength}, ${b.ids} ids)`;
      throw new TraceFormatError(
        line,
        'hash_ids',
        `the lines disagree on the block size: ${range(this.lo)} needs at least ${this.lo.value} tokens per block, ${range(this.hi)} at most ${this.hi.value}; no single block size fits every line, and none is stated. Give --block-size B (lines that do not fit it are then counted as hash_ids_length warnings)`,
        this.source,
      );
    }
  }

  /** The block size for `formatName`, whose default is `defaultSize`; throws when it cannot tell. */
  decide(defaultSize: number, formatName: string): BlockSizeDecision {
    const { value: lo } = this.lo;
    const { value: hi } = this.hi;
    if (defaultSize >= lo && defaultSize <= hi) return { size: defaultSize };
    const powers: number[] = [];
    for (let p = 1; p <= Math.min(hi, LARGEST_POWER); p *= 2) if (p >= lo) powers.push(p);
    const lines = `the first ${this.lines} ${this.lines === 1 ? 'line' : 'lines'}`;
    const span = `${lo}${hi === Infinity ? ' or more' : hi === lo ? '' : `–${hi}`}`;
    const size = powers.length === 1 ? powers[0]! : lo === hi ? lo : undefined;
    if (size !== undefined)
      return {
        size,
        note: `block size ${size} inferred: no line states block_size, the ${formatName} default ${defaultSize} does not fit, and ${size} is the ${powers.length === 1 ? 'one power of two' : 'one size'} for which each of ${lines} has ceil(input_length / ${size}) hash_ids (fitting: ${span}); state it with --block-size ${size}`,
      };
    throw new TraceFormatError(
      this.lastLine,
      'hash_ids',
      `the block size is not stated (no block_size field, no --block-size), the ${formatName} default ${defaultSize} does not fit, and ${lines} fit any of ${span}${powers.length > 1 ? ` (powers of two: ${powers.slice(0, 6).join(', ')}${powers.length > 6 ? ', …' : ''})` : ''}; give --block-size B`,
      this.source,
    );
  }
}
