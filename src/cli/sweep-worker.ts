/** The Piscina task of `kvroute sweep`: one offline cell (sweep-cell.ts), failures as values. */
import { runSimCell, type CellFailure, type SimCellResult, type SimCellTask } from './sweep-cell.js';

export default async function simCellTask(task: SimCellTask): Promise<SimCellResult | CellFailure> {
  try {
    return await runSimCell(task);
  } catch (error) {
    const failure: CellFailure = { failed: true, message: error instanceof Error ? error.message : String(error) };
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string') failure.code = code;
    return failure;
  }
}
