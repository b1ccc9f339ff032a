// @ts-check
// What every benchmark prints first: the machine, the Node version, and
// whether the native addon is active (and from where).
import os from 'node:os';

import { nativePath } from '../../dist/index.js';

/** @returns {{ cpu: string, cores: number, memoryGiB: number, os: string, node: string, native: string | null, date: string }} */
export function machineInfo() {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    native: nativePath(),
    date: new Date().toISOString().slice(0, 10),
  };
}

/** @param {ReturnType<typeof machineInfo>} m */
export function printMachine(m) {
  console.log(`machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}`);
  console.log(`node:    ${m.node}`);
  console.log(
    `native:  ${m.native ? `on (${m.native})` : 'OFF (addon not built; only the TypeScript reference runs)'}`,
  );
  console.log(`date:    ${m.date}`);
}
