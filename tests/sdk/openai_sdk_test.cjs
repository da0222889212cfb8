// The official `openai` npm SDK, unmodified, against a running `keel serve` (KEEL_BASE_URL):
// models, chat and completions, streamed and not, n = 2, usage on request, and errors surfacing
// as the SDK's typed exceptions. Exits non-zero on the first failed check.
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

(async () => {
  const model = await models();
  await chat(model);
  await completions(model);
  await errors(model);
  console.log('openai SDK: all checks passed against', process.env.KEEL_BASE_URL);
})().catch((e) => {
  console.error('openai SDK test failed:', e);
  process.exit(1);
});
