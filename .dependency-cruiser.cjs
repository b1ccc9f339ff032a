// The layering rules of docs/architecture.md, checked by `npm run check:architecture`
// (part of `npm run lint`, so CI runs it). Each room may import only the rooms listed for it;
// a rule here and the table in docs/architecture.md change together.
/** room -> the other rooms under src/ it may import */
const allowed = {
  core: [],
  trace: ['core'],
  analysis: ['core', 'trace'],
  events: ['core'],
  state: ['core'],
  tokenize: ['core'],
  flow: ['core'],
  cluster: ['core'],
  sim: ['core', 'trace', 'events', 'state', 'tokenize', 'flow'],
  replay: ['core', 'trace', 'analysis', 'state'],
  proxy: ['core', 'events', 'state', 'tokenize', 'flow'],
  live: ['core', 'trace', 'analysis', 'replay', 'sim', 'state'],
  report: ['core', 'trace', 'analysis', 'sim'],
};

const roomRules = Object.entries(allowed).map(([room, may]) => ({
  name: `layer-${room}`,
  comment: `src/${room}/ may import only ${may.length ? may.map((r) => `src/${r}/`).join(', ') : 'itself'} (docs/architecture.md)`,
  severity: 'error',
  from: { path: `^src/${room}/` },
  to: { path: '^src/', pathNot: [`^src/${room}/`, ...may.map((r) => `^src/${r}/`)] },
}));

module.exports = {
  forbidden: [
    ...roomRules,
    {
      name: 'no-cli-in-libraries',
      comment: 'Only the command line (src/cli/, src/cli.ts) imports the command line.',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/cli/', '^src/cli[.]ts$'] },
      to: { path: '^src/cli/' },
    },
    {
      name: 'root-entry-is-the-core',
      comment:
        'The package root (kvroute) loads the routing core and its reconciler only; the rest has subpath entries (src/entries/).',
      severity: 'error',
      from: { path: '^src/index[.]ts$' },
      to: { path: '^src/', pathNot: ['^src/core/', '^src/state/shadow-reconciler[.]ts$'] },
    },
    {
      name: 'no-circular',
      comment: 'No import cycles: a file and what it imports form a tree.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    tsConfig: { fileName: 'tsconfig.build.json' },
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a layer that needs another's types depends on it.
    tsPreCompilationDeps: true,
  },
};
