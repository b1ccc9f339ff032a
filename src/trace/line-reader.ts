/**
 * Splits decoded bytes into numbered lines without holding more than one chunk plus one partial
 * line in memory. Lines are split on `\n` (a trailing `\r` is dropped) and decoded as UTF-8 one
 * at a time. A UTF-8 byte-order mark before the first line is dropped. Blank lines (empty, or
 * only spaces and tabs) are skipped but still counted, so line numbers match the file's.
 */
export interface NumberedLine {
  /** 1-based line number in the file. */
  line: number;
  text: string;
}

const UTF8_BOM = [0xef, 0xbb, 0xbf] as const;
const NEWLINE = 10;
const CARRIAGE_RETURN = 13;

/** True when bytes [start, end) are only spaces and tabs (the caller has excluded empty). */
function blank(buffer: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (buffer[i] !== 0x20 && buffer[i] !== 0x09) return false;
  return true;
}

export async function* readLines(chunks: AsyncIterable<Buffer>): AsyncGenerator<NumberedLine> {
  let carry: Buffer | undefined;
  let line = 0;
  let first = true;
  for await (const chunk of chunks) {
    let buffer = carry === undefined ? chunk : Buffer.concat([carry, chunk]);
    if (first) {
      if (buffer.length < UTF8_BOM.length && UTF8_BOM.every((b, i) => i >= buffer.length || buffer[i] === b)) {
        carry = buffer; // too short to tell yet
        continue;
      }
      first = false;
      if (UTF8_BOM.every((b, i) => buffer[i] === b)) buffer = buffer.subarray(UTF8_BOM.length);
    }
    let start = 0;
    for (let newline = buffer.indexOf(NEWLINE, start); newline !== -1; newline = buffer.indexOf(NEWLINE, start)) {
      line++;
      const end = newline > start && buffer[newline - 1] === CARRIAGE_RETURN ? newline - 1 : newline;
      // Only a line starting with a space or tab can be blank; the check stays off the common path.
      if (end > start && !((buffer[start] === 0x20 || buffer[start] === 0x09) && blank(buffer, start, end)))
        yield { line, text: buffer.toString('utf8', start, end) };
      start = newline + 1;
    }
    carry = start < buffer.length ? buffer.subarray(start) : undefined;
  }
  if (carry !== undefined) {
    if (first && UTF8_BOM.every((b, i) => i >= carry!.length || carry![i] === b)) return; // a lone partial BOM
    const end = carry[carry.length - 1] === CARRIAGE_RETURN ? carry.length - 1 : carry.length;
    if (end > 0 && !blank(carry, 0, end)) yield { line: line + 1, text: carry.toString('utf8', 0, end) };
  }
}
