// The official `openai` npm SDK, unmodified, against a running `keel serve` (KEEL_BASE_URL):
// models, chat and completions, streamed and not, n = 2, usage on request, errors surfacing
// as the SDK's typed exceptions, and tool calling: a forced call → tool result → answer round
// trip, a streamed call accumulated by the SDK's ChatCompletionStream from several argument
// fragments, "auto" outputs that are content or calls that parse, and the SDK's runTools helper
// (streamed and not). Exits non-zero on the first failed check.
'use strict';
const assert = require('node:assert/strict');
const OpenAI = require(process.env.OPENAI_MODULE || 'openai');

const client = new OpenAI({ baseURL: process.env.KEEL_BASE_URL, apiKey: 'sk-keel-test' });

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

async function models() {
  const page = await client.models.list();
  assert.ok(page.data.length >= 1);
  assert.equal(page.data[0].object, 'model');
  return page.data[0].id;
}

async function chat(model) {
  const messages = [{ role: 'user', content: 'Tell me a story about a cat.' }];
  const full = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
  assert.equal(full.object, 'chat.completion');
  assert.equal(full.choices[0].message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(full.choices[0].finish_reason));
  assert.ok(full.usage.prompt_tokens > 0 && full.usage.completion_tokens > 0);

  const chunks = await collect(await client.chat.completions.create({
    model, messages, max_tokens: 24, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  }));
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert.equal(text, full.choices[0].message.content);
  const last = chunks[chunks.length - 1];
  assert.equal(last.choices.length, 0);
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
    assert.equal(last.usage[k], full.usage[k]);
  }
  assert.ok(last.usage.prompt_tokens_details.cached_tokens > 0);  // the same prompt again
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id));
}

async function completions(model) {
  const prompt = 'Once upon a time';
  const full = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0, n: 2 });
  assert.equal(full.object, 'text_completion');
  assert.equal(full.choices.length, 2);
  assert.equal(full.choices[0].text, full.choices[1].text);  // greedy: both choices agree
  const chunks = await collect(await client.completions.create({
    model, prompt, max_tokens: 16, temperature: 0, stream: true,
  }));
  assert.ok(chunks.every((c) => c.usage == null));  // usage only when asked
  assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), full.choices[0].text);
}

async function errors(model) {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && typeof e.message === 'string');
  await assert.rejects(
    client.completions.create({ model, prompt: 'x', temperature: -1 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
}

const addParameters = {
  type: 'object',
  properties: { a: { type: 'integer' }, b: { type: 'integer' } },
  required: ['a', 'b'],
};
const addTool = { type: 'function', function: { name: 'add', description: 'Adds two integers', parameters: addParameters } };
const forceAdd = { type: 'function', function: { name: 'add' } };

function checkAddCall(call) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_[A-Za-z0-9]+$/);
  assert.equal(call.function.name, 'add');
  const args = JSON.parse(call.function.arguments);
  assert.ok(Number.isInteger(args.a) && Number.isInteger(args.b), call.function.arguments);
  return args;
}

// call (forced) → tool result → answer, with plain create() calls.
async function toolRoundTrip(model) {
  const messages = [{ role: 'user', content: 'What is 2 plus 3?' }];
  const first = await client.chat.completions.create({
    model, messages, tools: [addTool], tool_choice: forceAdd, max_tokens: 48, temperature: 0,
  });
  const choice = first.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  const args = checkAddCall(choice.message.tool_calls[0]);
  messages.push(choice.message);
  messages.push({ role: 'tool', tool_call_id: choice.message.tool_calls[0].id, content: String(args.a + args.b) });
  const answer = await client.chat.completions.create({ model, messages, tools: [addTool], max_tokens: 16, temperature: 0 });
  assert.ok(['stop', 'length'].includes(answer.choices[0].finish_reason));
  assert.equal(typeof answer.choices[0].message.content, 'string');
  assert.ok(answer.choices[0].message.content.length > 0);
}

// A streamed forced call, accumulated by the SDK's ChatCompletionStream helper.
async function toolStream(model) {
  const stream = client.beta.chat.completions.stream({
    model, messages: [{ role: 'user', content: 'Add 4 and 5.' }], tools: [addTool],
    tool_choice: 'required', parallel_tool_calls: false, max_tokens: 48, temperature: 0,
  });
  const deltas = [];
  stream.on('chunk', (chunk) => { for (const c of chunk.choices) if (c.delta.tool_calls) deltas.push(...c.delta.tool_calls); });
  const final = await stream.finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(final.choices[0].message.tool_calls.length, 1);
  checkAddCall(final.choices[0].message.tool_calls[0]);
  assert.equal(deltas[0].index, 0);
  assert.equal(deltas[0].function.arguments, '');
  assert.ok(deltas.slice(1).every((d) => d.index === 0 && d.id === undefined));
  // The arguments were streamed as generated: several fragments that add up to the final ones.
  const fragments = deltas.slice(1).map((d) => d.function.arguments);
  assert.ok(fragments.length >= 3, `arguments in ${fragments.length} fragment(s)`);
  assert.equal(fragments.join(''), final.choices[0].message.tool_calls[0].function.arguments);
}

// tool_choice "auto" (the default with tools): whatever the model writes is content or a call
// that parses, streamed or not.
async function toolAuto(model) {
  const messages = [{ role: 'user', content: 'What is 2 plus 3?' }];
  for (let seed = 1; seed <= 3; ++seed) {
    const r = await client.chat.completions.create({ model, messages, tools: [addTool], max_tokens: 48, seed });
    const m = r.choices[0].message;
    if (m.tool_calls) {
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
      checkAddCall(m.tool_calls[0]);
    } else {
      assert.equal(typeof m.content, 'string');
    }
    const stream = client.beta.chat.completions.stream({ model, messages, tools: [addTool], max_tokens: 48, seed });
    const final = await stream.finalChatCompletion();
    const sm = final.choices[0].message;
    if (sm.tool_calls && sm.tool_calls.length > 0) checkAddCall(sm.tool_calls[0]);
  }
}

// The SDK's runTools helper runs the function the model calls and sends its result back.
async function toolRunner(model) {
  for (const stream of [false, true]) {
    const seen = [];
    const runner = client.beta.chat.completions.runTools({
      model, messages: [{ role: 'user', content: 'Add 6 and 7.' }], max_tokens: 48, temperature: 0, stream,
      tool_choice: forceAdd,
      tools: [{ type: 'function', function: { name: 'add', parameters: addParameters, parse: JSON.parse,
        function: (args) => { seen.push(args); return args.a + args.b; } } }],
    });
    await runner.done();
    assert.equal(seen.length, 1);
    assert.ok(Number.isInteger(seen[0].a) && Number.isInteger(seen[0].b));
    const last = runner.messages[runner.messages.length - 1];
    assert.equal(last.role, 'tool');
    assert.equal(last.content, String(seen[0].a + seen[0].b));
  }
}

(async () => {
  const model = await models();
  await chat(model);
  await completions(model);
  await errors(model);
  await toolRoundTrip(model);
  await toolStream(model);
  await toolAuto(model);
  await toolRunner(model);
  console.log('openai SDK: all checks passed against', process.env.KEEL_BASE_URL);
})().catch((e) => {
  console.error('openai SDK test failed:', e);
  process.exit(1);
});
