// JSON Schema as the clients write it, against a running `keel serve` (KEEL_BASE_URL): every
// schema of the corpus (schema_corpus.cjs: zod through zod-to-json-schema, the AI SDK, LangChain,
// the openai SDK and zod 4; pydantic v1 from PYDANTIC_V1, v2 from PYDANTIC_V2) is sent as a strict
// json_schema response_format (2 seeds) and, for object schemas, as a strict function's
// parameters with a forced call; every answer must be accepted (no 400), finish with `stop` and
// validate under ajv + ajv-formats (full mode) — and under zod itself for the zod schemas. Then the
// SDK helpers: the openai SDK's zodResponseFormat / zodFunction with `parse`, and the AI SDK's
// generateObject through an OpenAI-compatible provider pointed at keel. Prints the counts; exits
// non-zero on any refused, invalid or truncated answer.
// ajv options: strict off (pydantic's `discriminator`, formats such as `password`),
// unicodeRegExp off (zod-to-json-schema escapes `:` and `/` in patterns, which unicode mode
// refuses), multipleOfPrecision 12 (ajv's default divides doubles: 0.07 / 0.01 =
// 7.000000000000001; keel's multiples are exact decimals, as JSON Schema defines them).
'use strict';
const path = require('node:path');
const fs = require('node:fs');

const npm = path.join(process.env.KEEL_NPM_DIR, 'node_modules');
const M = (p) => require(path.join(npm, p));
const OpenAI = M('openai');
const Ajv7 = M('ajv').default;
const Ajv2020 = M('ajv/dist/2020').default;
const addFormats = M('ajv-formats').default;
const { zodCorpus, unique, models } = require('./schema_corpus.cjs');

const baseURL = process.env.KEEL_BASE_URL;
const client = new OpenAI({ baseURL, apiKey: 'sk-keel-test' });
const kMaxTokens = Number(process.env.KEEL_MAX_TOKENS || 440);  // stories260K: 512 tokens in all
const kToolMaxTokens = Number(process.env.KEEL_TOOL_MAX_TOKENS || 200);
// As a tool, the schema is written into the prompt too (keel's generic tool text): a schema of
// 300 bytes already takes 450 of stories260K's 512 tokens. A tool request whose prompt and
// max_tokens exceed the context is refused as context_length_exceeded: counted apart ("did not
// fit"), not as a schema refusal. bench/schema_keywords.sh runs the corpus on a longer context.

function validator(schema) {
  const text = JSON.stringify(schema);
  const draft2020 = (schema.$schema || '').includes('2020-12') || text.includes('"prefixItems"') ||
                    (!schema.$schema && text.includes('"$defs"'));
  const ajv = new (draft2020 ? Ajv2020 : Ajv7)({
    strict: false, allErrors: true, unicodeRegExp: false, multipleOfPrecision: 12, logger: false,
  });
  addFormats(ajv, { mode: 'full' });
  const s = { ...schema };
  delete s.$schema;
  return ajv.compile(s);
}

function pydantic(file, source) {
  if (!file) return [];
  const d = JSON.parse(fs.readFileSync(file, 'utf8'));
  return d.schemas.map((x) => ({ source: `${source} (${d.pydantic})`, name: x.name, schema: x.schema }));
}

async function pool(items, n, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) await fn(items[next++]);
  }));
}

// One answer: 'refused' | 'truncated' | 'invalid' | 'ok', with the reason.
function judge(e, validate, finish, text) {
  if (finish !== 'stop') return ['truncated', `finish_reason ${finish}`];
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    return ['invalid', `does not parse: ${text.slice(0, 200)}`];
  }
  if (!validate(doc)) return ['invalid', `${JSON.stringify(validate.errors).slice(0, 300)} in ${text.slice(0, 300)}`];
  if (e.zod && !e.zod.safeParse(doc).success) return ['zod', `zod rejects ${text.slice(0, 300)}`];
  return ['ok', ''];
}

async function ask(model, e, validate, seed, asTool) {
  const messages = [{ role: 'user', content: `Write a ${e.name} as JSON.` }];
  const req = { model, messages, temperature: 1, seed, max_tokens: asTool ? kToolMaxTokens : kMaxTokens };
  if (asTool) {
    req.tools = [{ type: 'function', function: { name: 'emit', parameters: e.schema, strict: true } }];
    req.tool_choice = { type: 'function', function: { name: 'emit' } };
  } else {
    req.response_format = { type: 'json_schema', json_schema: { name: 'answer', schema: e.schema, strict: true } };
  }
  let r;
  try {
    r = await client.chat.completions.create(req);
  } catch (err) {
    if (err.status === 400 && err.code === 'context_length_exceeded') return ['context', err.message];
    if (err.status === 400) return ['refused', err.message];
    throw err;
  }
  const c = r.choices[0];
  if (asTool) {
    const call = c.message.tool_calls?.[0];
    if (!call) return ['invalid', `no tool call: ${c.message.content}`];
    return judge(e, validate, c.finish_reason === 'tool_calls' ? 'stop' : c.finish_reason, call.function.arguments);
  }
  return judge(e, validate, c.finish_reason, c.message.content);
}

async function helpers(model) {
  const { zodResponseFormat, zodFunction } = M('openai/helpers/zod');
  const z3 = M('zod').z;
  const m = models(z3, false);
  const failures = [];
  const quiet = console.warn;
  console.warn = () => {};
  // The SDK parses with zod and throws on anything zod rejects.
  const attempt = async (what, fn) => {
    try {
      if (!(await fn())) failures.push(`${what}: nothing parsed`);
    } catch (err) {
      failures.push(`${what}: ${String(err.message).slice(0, 300)}`);
    }
  };
  try {
    for (const name of ['User', 'Order', 'Pet', 'Contact', 'Event']) {
      await attempt(`openai parse ${name}`, async () => {
        const r = await client.beta.chat.completions.parse({
          model, messages: [{ role: 'user', content: `A ${name}` }], temperature: 1, seed: 7,
          max_tokens: kMaxTokens, response_format: zodResponseFormat(m[name], name),
        });
        return r.choices[0].message.parsed;
      });
    }
    const Forecast = z3.object({ city: z3.string().max(20), days: z3.number().int().min(1).max(7) });
    await attempt('openai zodFunction', async () => {
      const t = await client.beta.chat.completions.parse({
        model, messages: [{ role: 'user', content: 'Weather in Paris?' }], temperature: 1, seed: 3,
        tools: [zodFunction({ name: 'weather', parameters: Forecast })],
        tool_choice: { type: 'function', function: { name: 'weather' } },
      });
      return t.choices[0].message.tool_calls?.[0]?.function?.parsed_arguments;
    });
  } finally {
    console.warn = quiet;
  }
  const { createOpenAICompatible } = M('@ai-sdk/openai-compatible');
  const { generateObject } = M('ai');
  const keel = createOpenAICompatible({ name: 'keel', baseURL, apiKey: 'sk-keel-test', supportsStructuredOutputs: true });
  for (const [v4, name] of [[false, 'User'], [false, 'Inventory'], [true, 'Measurement'], [true, 'Contact']]) {
    const schema = models(v4 ? M('zod/v4').z : z3, v4)[name];
    try {
      const { object } = await generateObject({
        model: keel(model), schema, prompt: `A ${name}`, temperature: 1, seed: 11, maxOutputTokens: kMaxTokens,
      });
      if (!schema.safeParse(object).success) failures.push(`AI SDK generateObject ${name}: invalid object`);
    } catch (err) {
      failures.push(`AI SDK generateObject ${name} (zod ${v4 ? 4 : 3}): ${err.message.slice(0, 300)}`);
    }
  }
  return failures;
}

async function main() {
  const model = (await client.models.list()).data[0].id;
  const entries = unique([
    ...zodCorpus(process.env.KEEL_NPM_DIR),
    ...pydantic(process.env.PYDANTIC_V1, 'pydantic v1'),
    ...pydantic(process.env.PYDANTIC_V2, 'pydantic v2'),
  ]);
  const counts = { ok: 0, refused: 0, invalid: 0, truncated: 0, zod: 0, context: 0 };
  const problems = [];
  const zodRejects = [];  // valid under the converted schema, not under zod: the converter's loss
  const bySource = {};
  await pool(entries, 6, async (e) => {
    const validate = validator(e.schema);
    const runs = [[1, false], [2, false]];
    if (e.schema.type === 'object') runs.push([3, true]);
    for (const [seed, asTool] of runs) {
      const [verdict, why] = await ask(model, e, validate, seed, asTool);
      counts[verdict] += 1;
      const s = (bySource[e.source] ??= { schemas: new Set(), answers: 0, bad: 0 });
      s.schemas.add(e.name);
      s.answers += 1;
      if (verdict === 'zod') {
        zodRejects.push(`${e.source} ${e.name}: ${why}`);
      } else if (verdict === 'context') {
        s.answers -= 1;
      } else if (verdict !== 'ok') {
        s.bad += 1;
        problems.push(`${verdict}: ${e.source} ${e.name}${asTool ? ' (tool)' : ''}: ${why}`);
      }
    }
  });
  for (const [source, s] of Object.entries(bySource)) {
    console.log(`  ${source}: ${s.schemas.size} schemas, ${s.answers} answers, ${s.bad} bad`);
  }
  const total = Object.values(counts).reduce((a, b) => a + b, 0) - counts.context;
  console.log(`corpus: ${entries.length} distinct schemas (${entries.reduce((a, e) => a + 1 + e.also.length, 0)} ` +
              `as converted), ${total} answers: ${counts.refused} refused, ${counts.invalid} invalid, ` +
              `${counts.truncated} truncated; ${counts.ok + counts.zod} valid ` +
              `(${counts.context} tool requests did not fit the model's context)`);
  for (const p of problems) console.log(`  ${p}`);
  console.log(`zod itself rejects ${zodRejects.length} answers that its converted schema accepts ` +
              '(lossy conversions: z.date() and z.set() as JSON strings and arrays, recursion as {}, ' +
              'tuples without items: false)');
  for (const p of zodRejects) console.log(`    ${p.slice(0, 160)}`);
  const failures = await helpers(model);
  console.log(`helpers: openai parse x5 + zodFunction, AI SDK generateObject x4: ${failures.length} failed`);
  for (const p of failures) console.log(`  ${p}`);
  if (problems.length > 0 || failures.length > 0) process.exit(1);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
