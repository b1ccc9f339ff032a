// Embedding kvroute in a Node server: route each request of an agentic
// conversation to the engine that already holds its prefix.
//
//   node examples/embed.mjs
import { Router } from 'kvroute';

const router = new Router({
  instances: ['http://10.0.0.1:8000', 'http://10.0.0.2:8000', 'http://10.0.0.3:8000'],
  capacityBlocks: 65_536,
});

const conversation = [
  { role: 'system', content: 'You are a coding agent working in the kvroute repository. '.repeat(30) },
  { role: 'user', content: 'Make the block index evict least recently used blocks first.' },
];

for (let turn = 1; turn <= 3; turn += 1) {
  // 1. Place the request (one synchronous call into the addon).
  const ticket = router.route({ messages: conversation, session: 'conversation-42' });
  const { instance, reason } = router.decision;
  console.log(`turn ${turn}: ${instance} (${reason})`);

  // 2. Forward it to `instance`; as the response streams back:
  router.onFirstToken(ticket);
  const reply = `Edited native/block-index.cc (step ${turn}).`;
  router.complete(ticket);

  // 3. The agent appends the reply and a tool result, and goes again.
  conversation.push({ role: 'assistant', content: reply }, { role: 'tool', content: 'ok '.repeat(200) });
}

// Why the last decision went where it did:
const { candidates } = router.explain();
for (const c of candidates)
  console.log(`  ${c.instance}: ${c.matchedBlocks} blocks cached, score ${c.score?.toFixed(1) ?? 'none'}`);

// A new conversation with no cached prefix goes by load:
router.route({ messages: [{ role: 'user', content: 'Hello' }], session: 'conversation-43' });
console.log(`new conversation: ${router.decision.instance} (${router.decision.reason})`);
