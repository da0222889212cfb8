// The official `openai` npm SDK, unmodified, against `keel serve` (KEEL_BASE_URL): the Responses
// API — responses.create (plain, structured output, streamed raw and through the SDK's
// ResponseStream helper), a function tool → function_call_output round trip, a 5-turn
// previous_response_id chain (with a tool call) whose last prompt has as many tokens as resending
// the whole history, retrieve, inputItems.list, del, background runs (polled to completion, and
// cancelled), and the errors: a built-in tool (400 naming it), an unknown previous_response_id
// (404 previous_response_not_found), an unknown id. Exits non-zero on the first failed check.
'use strict';
const assert = require('node:assert/strict');
const OpenAI = require(process.env.OPENAI_MODULE || 'openai');

const client = new OpenAI({ baseURL: process.env.KEEL_BASE_URL, apiKey: 'sk-keel-test' });
const model = 'stories';
const addTool = {
  type: 'function', name: 'add', description: 'Adds two integers', strict: true,
  parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } },
    required: ['a', 'b'], additionalProperties: false },
};

async function plain() {
  const r = await client.responses.create({ model, input: 'Tell me a story about a cat.', instructions: 'Be brief.',
    max_output_tokens: 24, temperature: 0, metadata: { suite: 'sdk' } });
  assert.equal(r.object, 'response');
  assert.ok(r.id.startsWith('resp_'));
  assert.ok(['completed', 'incomplete'].includes(r.status));
  assert.equal(r.output[0].type, 'message');
  assert.equal(typeof r.output_text, 'string');
  assert.ok(r.output_text.length > 0);
  assert.equal(r.metadata.suite, 'sdk');
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
  return r;
}

async function structured() {
  const r = await client.responses.create({ model, input: 'A person.', max_output_tokens: 200, temperature: 0,
    text: { format: { type: 'json_schema', name: 'person', strict: true, schema: {
      type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } },
      required: ['name', 'age'], additionalProperties: false } } } });
  const parsed = JSON.parse(r.output_text);
  assert.deepEqual(Object.keys(parsed), ['name', 'age']);
}

async function streaming(reference) {
  const events = [];
  const stream = await client.responses.create({ model, input: 'Tell me a story about a cat.', instructions: 'Be brief.',
    max_output_tokens: 24, temperature: 0, stream: true });
  for await (const e of stream) events.push(e);
  events.forEach((e, i) => assert.equal(e.sequence_number, i));
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[1].type, 'response.in_progress');
  const types = new Set(events.map((e) => e.type));
  for (const t of ['response.output_item.added', 'response.content_part.added', 'response.output_text.delta',
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done']) {
    assert.ok(types.has(t), t);
  }
  const last = events[events.length - 1];
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type));
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(text, reference.output_text);  // greedy: the same answer as unstreamed
  // The SDK's helper accumulates the events into the final response.
  const helper = client.responses.stream({ model, input: 'Tell me a story about a cat.', instructions: 'Be brief.',
    max_output_tokens: 24, temperature: 0 });
  const final = await helper.finalResponse();
  assert.equal(final.output[0].content[0].text, reference.output_text);
}

// History items of a response as a client resends them (its input and output items).
async function historyOf(r) {
  const items = [];
  for await (const item of client.responses.inputItems.list(r.id, { order: 'asc' })) items.push(item);
  return items.concat(r.output);
}

async function chainWithTools() {
  const turns = [];
  const history = [];
  let prev;
  // stories260K has a 512-token context: short answers, and the tool only where it is called.
  const ask = async (input, extra = {}) => {
    const r = await client.responses.create({ model, input, previous_response_id: prev,
      max_output_tokens: 8, temperature: 0, ...extra });
    assert.ok(['completed', 'incomplete'].includes(r.status), JSON.stringify(r));
    history.push(...(typeof input === 'string' ? [{ role: 'user', content: input }] : input), ...r.output);
    turns.push(r);
    prev = r.id;
    return r;
  };
  await ask('Hello there.');
  const called = await ask('What is 2 plus 3?',
    { tools: [addTool], tool_choice: { type: 'function', name: 'add' }, max_output_tokens: 48 });
  const call = called.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(called.output));
  assert.equal(call.name, 'add');
  assert.match(call.call_id, /^call_[A-Za-z0-9]+$/);
  const args = JSON.parse(call.arguments);
  assert.ok(Number.isInteger(args.a) && Number.isInteger(args.b), call.arguments);
  await ask([{ type: 'function_call_output', call_id: call.call_id, output: String(args.a + args.b) }]);
  await ask('Thanks! And then?');
  const last = await ask('Tell me more.');
  assert.equal(turns.length, 5);
  assert.equal(last.previous_response_id, turns[3].id);
  // Resending the whole history (no previous_response_id) gives the same prompt.
  const resent = await client.responses.create({ model, input: history.slice(0, history.length - last.output.length),
    max_output_tokens: 8, temperature: 0 });
  assert.equal(last.usage.input_tokens, resent.usage.input_tokens);
  assert.ok(last.usage.input_tokens > turns[0].usage.input_tokens);
  // The chain's earlier turns are a prefix of its prompt: their KV comes from the prefix cache.
  assert.ok(last.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(last.usage));
  // inputItems of the call's answer: the function_call_output it was given.
  const items = await historyOf(turns[2]);
  assert.equal(items[0].type, 'function_call_output');
  assert.equal(items[0].call_id, call.call_id);
  return turns;
}

async function retrieveAndDelete(r) {
  const got = await client.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  assert.deepEqual(got.output, r.output);
  const page = await client.responses.inputItems.list(r.id);
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].type, 'message');
  assert.equal(page.data[0].content[0].text, 'Tell me a story about a cat.');
  const deleted = await client.responses.del(r.id);
  assert.deepEqual(deleted, { id: r.id, object: 'response', deleted: true });
  await assert.rejects(client.responses.retrieve(r.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.responses.del(r.id), (e) => e instanceof OpenAI.NotFoundError);
}

async function background() {
  const r = await client.responses.create({ model, input: 'Once upon a time', background: true, max_output_tokens: 16 });
  assert.ok(['queued', 'in_progress'].includes(r.status), r.status);
  assert.equal(r.background, true);
  let got = r;
  for (let i = 0; i < 600 && ['queued', 'in_progress'].includes(got.status); ++i) {
    await new Promise((ok) => setTimeout(ok, 50));
    got = await client.responses.retrieve(r.id);
  }
  assert.ok(['completed', 'incomplete'].includes(got.status), got.status);
  assert.ok(got.output_text === undefined || typeof got.output_text === 'string');
  assert.ok(got.output[0].content[0].text.length > 0);
  // Several long runs: the last one waits behind the others (4 run at once) and is cancelled.
  const runs = [];
  for (let i = 0; i < 6; ++i) {
    runs.push(await client.responses.create({ model, input: 'Once upon a time', background: true, max_output_tokens: 400 }));
  }
  const victim = runs[runs.length - 1];
  const cancelled = await client.responses.cancel(victim.id);
  assert.equal(cancelled.status, 'cancelled');
  assert.equal((await client.responses.retrieve(victim.id)).status, 'cancelled');
  for (const run of runs.slice(0, -1)) await client.responses.cancel(run.id);
  // A foreground response cannot be cancelled.
  const fg = await client.responses.create({ model, input: 'Hi', max_output_tokens: 4 });
  await assert.rejects(client.responses.cancel(fg.id), (e) => e instanceof OpenAI.BadRequestError);
}

async function errors() {
  await assert.rejects(
    client.responses.create({ model, input: 'Search the web.', tools: [{ type: 'web_search_preview' }] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.message.includes('web_search_preview'));
  await assert.rejects(
    client.responses.create({ model, input: 'Hi', previous_response_id: 'resp_does_not_exist' }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'previous_response_not_found');
  await assert.rejects(client.responses.retrieve('resp_does_not_exist'),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
}

(async () => {
  const reference = await plain();
  await structured();
  await streaming(reference);
  await chainWithTools();
  await retrieveAndDelete(reference);
  await background();
  await errors();
  console.log('openai SDK responses: all checks passed against', process.env.KEEL_BASE_URL);
})().catch((e) => {
  console.error('openai SDK responses test failed:', e);
  process.exit(1);
});
