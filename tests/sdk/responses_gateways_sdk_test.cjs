// The official `openai` npm SDK, unmodified, against two gateways of one cluster sharing
// --responses-dir (A_URL: `keel cluster up`'s, B_URL: `keel cluster gateway`'s): a tool call
// created through B is retrieved and listed through A and answered through A by
// previous_response_id; a streamed turn through B continues A's response and has as many prompt
// tokens as resending the whole history; deleted through B, it is a 404 through A, and a chain
// through it 404 previous_response_not_found. Exits non-zero on the first failed check.
'use strict';
const assert = require('node:assert/strict');
const OpenAI = require(process.env.OPENAI_MODULE || 'openai');
const a = new OpenAI({ baseURL: process.env.A_URL, apiKey: 'sk-x' });
const b = new OpenAI({ baseURL: process.env.B_URL, apiKey: 'sk-x' });
const model = 'stories';
const addTool = { type: 'function', name: 'add', description: 'Adds two integers', strict: true,
  parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } },
    required: ['a', 'b'], additionalProperties: false } };
(async () => {
  const r1 = await b.responses.create({ model, input: 'What is 2 plus 3?', tools: [addTool], tool_choice: 'required',
    max_output_tokens: 40, temperature: 0 });
  const call = r1.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(r1.output));
  const got = await a.responses.retrieve(r1.id);
  assert.deepEqual(got.output, r1.output);
  const items = await a.responses.inputItems.list(r1.id);
  assert.equal(items.data.length, 1);
  const r2 = await a.responses.create({ model, previous_response_id: r1.id, tools: [addTool],
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '5' }], max_output_tokens: 12, temperature: 0 });
  // streamed turn through B, continuing A's response
  const stream = await b.responses.create({ model, previous_response_id: r2.id, input: 'Thanks!', max_output_tokens: 8,
    temperature: 0, stream: true });
  let done;
  for await (const e of stream) if (e.type === 'response.completed' || e.type === 'response.incomplete') done = e.response;
  assert.ok(done);
  const viaA = await a.responses.retrieve(done.id);
  assert.equal(viaA.previous_response_id, r2.id);
  // the same turn, full history resent, through A: same prompt tokens
  const hist = await a.responses.create({ model, max_output_tokens: 8, temperature: 0, input: [
    { role: 'user', content: 'What is 2 plus 3?' }, ...r1.output,
    { type: 'function_call_output', call_id: call.call_id, output: '5' }, ...r2.output,
    { role: 'user', content: 'Thanks!' }] });
  assert.equal(done.usage.input_tokens, hist.usage.input_tokens);
  assert.equal((await b.responses.del(r1.id)).deleted, true);
  try { await a.responses.retrieve(r1.id); assert.fail('still there'); } catch (e) { assert.equal(e.status, 404); }
  try { await a.responses.create({ model, previous_response_id: r2.id, input: 'x', max_output_tokens: 4 }); assert.fail('chained'); }
  catch (e) { assert.equal(e.status, 404); assert.equal(e.code, 'previous_response_not_found'); }
  console.log('two-gateway SDK checks passed:', r1.id, r2.id, done.id);
})().catch((e) => { console.error(e); process.exit(1); });
