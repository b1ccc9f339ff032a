/** A count with its noun in the right number: "1 engine", "2 engines", "0 engines". */
export function counted(n: number, noun: string, nouns = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : nouns}`;
}
