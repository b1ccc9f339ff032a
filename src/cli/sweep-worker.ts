/**
 * The Piscina tasks of the simulator cells, failures as values: the default export runs one
 * offline `kvroute sweep` cell (sweep-cell.ts), `tunePoint` one `kvroute tune` evaluation
 * (tune-point.ts).
 */
import { runSimCell, type CellFailure, type SimCellResult, type SimCellTask } from './sweep-cell.js';
import { runTunePoint, type TunePointResult, type TunePointTask } from './tune-point.js';

/** `work`'s result, or its error as a CellFailure, so the error's `code` (its exit status) survives. */
async function asValue<T>(work: () => Promise<T>): Promise<T | CellFailure> {
  try {
    return await work();
  } catch (error) {
    const failure: CellFailure = { failed: true, message: error instanceof Error ? error.message : String(error) };
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string') failure.code = code;
    return failure;
  }
}

export default function simCellTask(task: SimCellTask): Promise<SimCellResult | CellFailure> {
  return asValue(() => runSimCell(task));
}

export function tunePoint(task: TunePointTask): Promise<TunePointResult | CellFailure> {
  return asValue(() => runTunePoint(task));
}
