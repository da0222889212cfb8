// The JSON Schema corpus: schemas as client libraries write them for common types. The same
// models (a user with an address, an order of items, an event, a recursive tree, a discriminated
// union, a record and a tuple, measurements, contacts, ...) are written with zod 3 and turned
// into JSON Schema by zod-to-json-schema, the AI SDK (`zodSchema`), LangChain (`toJsonSchema`)
// and the openai SDK (`zodResponseFormat`, strict mode); written again with zod 4's API and
// converted by `z.toJSONSchema`, the AI SDK and LangChain (zod 4 adds a `pattern` to every
// format); and pydantic's own schemas (v1 at test time, v2 from a committed fixture) are added by
// the caller. Duplicate schemas (same JSON) are kept once. Left out: times (zod's time() means a
// time without offset, JSON Schema's `time` one with; zod 4 writes both, which no string meets).
'use strict';
const path = require('node:path');

function models(z, v4) {
  const email = v4 ? z.email() : z.string().email();
  const uuid = v4 ? z.uuid() : z.string().uuid();
  const url = v4 ? z.url() : z.string().url();
  const date = v4 ? z.iso.date() : z.string().date();
  const datetime = v4 ? z.iso.datetime({ offset: true }) : z.string().datetime({ offset: true });
  const ipv4 = v4 ? z.ipv4() : z.string().ip({ version: 'v4' });
  const ipv6 = v4 ? z.ipv6() : z.string().ip({ version: 'v6' });
  const int = () => (v4 ? z.int() : z.number().int());
  const Address = z.object({
    street: z.string().min(1).max(80), city: z.string(), zip: z.string().regex(/^\d{5}$/),
    country: z.enum(['US', 'CA', 'MX']),
  });
  const Item = z.object({
    sku: z.string().regex(/^[A-Z]{3}-\d{4}$/), quantity: int().positive().max(100),
    unitPrice: z.number().positive().multipleOf(0.5),
  });
  const Node = z.lazy(() => z.object({ value: int().min(0).max(99), children: z.array(Node).max(2) }));
  const out = {
    User: z.object({
      id: uuid, name: z.string().min(1).max(40), email, age: int().min(0).max(130),
      website: url.optional(), createdAt: datetime, birthday: date, tags: z.array(z.string()).max(5),
      score: z.number().min(0).max(1), address: Address,
    }),
    Order: z.object({
      orderId: int().positive(), items: z.array(Item).min(1).max(4),
      status: z.enum(['pending', 'paid', 'shipped']), notes: z.string().nullable(),
      discount: int().multipleOf(5).min(0).max(50), total: z.number().nonnegative().multipleOf(0.01),
    }),
    Event: z.object({
      title: z.string(), starts: datetime, day: date, host: ipv4, backup: ipv6.optional(),
    }),
    Pet: z.object({
      pet: z.discriminatedUnion('kind', [
        z.object({ kind: z.literal('cat'), lives: int().min(1).max(9) }),
        z.object({ kind: z.literal('dog'), good: z.boolean() }),
      ]),
      owner: z.string(),
    }),
    Inventory: z.object({
      counts: z.record(z.string(), int().nonnegative()), location: z.tuple([z.number(), z.number()]),
    }),
    Measurement: z.object({
      sensor: z.string().min(3).max(12), celsius: z.number().gte(-273.15).lte(1000),
      humidity: z.number().min(0).lt(100), samples: z.array(z.number().min(0).max(10)).min(1).max(3),
      ok: z.boolean(),
    }),
    Contact: z.object({
      name: z.string(), email: (v4 ? z.email() : z.string().email()).max(255),
      phone: z.string().regex(/^\+?[0-9]{7,12}$/).optional(),
    }),
    Weather: z.object({ city: z.string(), unit: z.enum(['celsius', 'fahrenheit']), days: int().min(1).max(7) }),
    Link: z.object({ url: url.startsWith('https://'), title: z.string().max(60).optional() }),
    Shipment: z.object({ from: Address, to: Address, weightKg: z.number().positive().lte(50) }),
  };
  if (!v4) {
    // zod 4 writes a strict object's intersection as allOf of parts that each forbid the other's
    // properties (no value satisfies it), so Profile is zod 3 only.
    out.Profile = z.intersection(Address, z.object({ nickname: z.string().max(20) }));
    out.Tree = Node;
    // A set: an array of distinct items (zod 4 writes no schema for sets).
    out.Package = z.object({ labels: z.set(z.enum(['gift', 'fragile', 'express'])).max(2), kg: z.number().positive() });
    out.Slot = z.object({ starts: z.date(), minutes: int().multipleOf(15).min(15).max(240) });
  }
  return out;
}

// [{source, name, schema, zod}] from the zod converters.
function zodCorpus(npmDir) {
  const M = (p) => require(path.join(npmDir, 'node_modules', p));
  const z3 = M('zod').z;
  const z4 = M('zod/v4').z;
  const { zodToJsonSchema } = M('zod-to-json-schema');
  const ai = M('ai');
  const lc = M('@langchain/core/utils/json_schema');
  const { zodResponseFormat } = M('openai/helpers/zod');
  const out = [];
  const quiet = console.warn;
  console.warn = () => {};  // the converters warn about recursion and optional fields
  try {
    for (const [name, m] of Object.entries(models(z3, false))) {
      out.push({ source: 'zod-to-json-schema', name, schema: zodToJsonSchema(m), zod: m });
      out.push({ source: 'ai-sdk (zod 3)', name, schema: ai.zodSchema(m).jsonSchema, zod: m });
      out.push({ source: 'langchain (zod 3)', name, schema: lc.toJsonSchema(m), zod: m });
      if (name !== 'Tree' && name !== 'Slot') {
        out.push({ source: 'openai zodResponseFormat', name,
                   schema: zodResponseFormat(m, name).json_schema.schema, zod: null });
      }
    }
    for (const [name, m] of Object.entries(models(z4, true))) {
      out.push({ source: 'zod 4 toJSONSchema', name, schema: z4.toJSONSchema(m), zod: m });
      out.push({ source: 'ai-sdk (zod 4)', name, schema: ai.zodSchema(m).jsonSchema, zod: m });
      out.push({ source: 'langchain (zod 4)', name, schema: lc.toJsonSchema(m), zod: m });
    }
  } finally {
    console.warn = quiet;
  }
  return out;
}

// Keeps the first of identical schemas (the same model through converters that agree).
function unique(entries) {
  const seen = new Map();
  for (const e of entries) {
    const key = JSON.stringify(e.schema);
    if (seen.has(key)) {
      seen.get(key).also.push(e.source);
    } else {
      seen.set(key, { ...e, also: [] });
    }
  }
  return [...seen.values()];
}

module.exports = { models, zodCorpus, unique };
