// The import wall: the allowed directions between the repository's floors, as docs/design.md's "Layout"
// draws them (ground, rooms, engine, doors, hosts; a file imports its own floor or a lower one), checked
// by test/walls.test.ts in `npm test` and by `npx depcruise lib functions local bench console vendor`.
// docs/design.md ("Floors and doors") says why. A change of a direction changes that page's table too.
const ground = '^lib/(errors|text|kinds|events|log)[.]ts$|^lib/schema/'
const rooms = '^lib/(db|delivery|metrics|tracing)/'
const engine = '^lib/(config|deps|signals|enqueue|ops|shapes)[.]ts$|^lib/(enqueue|dispatch|sweeper|relay)/'
const doors = '^lib/(cli|admin)/'
const hosts = '^(functions|local|console|bench|test)/'

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A circle has no bottom floor: each module of it needs the others loaded first.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'ground-stays-down',
      severity: 'error',
      comment: 'Errors, text rules, kinds, event types, the logger and the schemas are what every floor stands on.',
      from: { path: ground },
      to: { path: `${rooms}|${engine}|${doors}|^lib/operate/|${hosts}` },
    },
    {
      name: 'rooms-stay-down',
      severity: 'error',
      comment: 'Statements, delivery, metrics and tracing take their settings as arguments, never from the engine above.',
      from: { path: rooms },
      to: { path: `${engine}|${doors}|^lib/operate/|${hosts}` },
    },
    {
      name: 'engine-below-doors',
      severity: 'error',
      comment: 'The engine runs without an operator door; the doors call it.',
      from: { path: engine },
      to: { path: `${doors}|^lib/operate/|${hosts}` },
    },
    {
      name: 'operate-below-doors',
      severity: 'error',
      comment: 'Operator verbs are shared by the doors, so they import neither.',
      from: { path: '^lib/operate/' },
      to: { path: `${doors}|${hosts}` },
    },
    {
      name: 'cli-not-admin',
      severity: 'error',
      comment: 'Two doors apart: what both need lives lower (lib/operate/, lib/db/, lib/text.ts).',
      from: { path: '^lib/cli/' },
      to: { path: '^lib/admin/' },
    },
    {
      name: 'admin-not-cli',
      severity: 'error',
      comment: 'Two doors apart: what both need lives lower (lib/operate/, lib/db/, lib/text.ts).',
      from: { path: '^lib/admin/' },
      to: { path: '^lib/cli/' },
    },
    {
      name: 'lib-not-hosts',
      severity: 'error',
      comment: 'lib/ is the engine whatever runs it: it never imports a host.',
      from: { path: '^lib/' },
      to: { path: hosts },
    },
    {
      name: 'lib-free-of-lambda',
      severity: 'error',
      comment: 'Only functions/ knows it runs on Lambda: no Lambda event types and no middy in lib/.',
      from: { path: '^(lib|vendor)/' },
      to: { path: '^node_modules/(@types/aws-lambda|aws-lambda|@middy)/' },
    },
    {
      name: 'hosts-apart',
      severity: 'error',
      comment: 'A Lambda handler never needs the local stack or the bench; the local stack never needs the bench.',
      from: { path: '^functions/' },
      to: { path: '^(local|bench|test)/' },
    },
    {
      name: 'local-not-bench',
      severity: 'error',
      comment: 'The bench reuses the local stack, not the other way round.',
      from: { path: '^local/' },
      to: { path: '^(bench|test)/' },
    },
  ],
  options: {
    doNotFollow: { path: '^node_modules' },
    // Type-only imports count: a circle through types is still a circle for a reader.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
}
