// Validates the samples engine_schema_keywords_test wrote (KEEL_SCHEMA_OUT: one JSON line per
// sample: keyword, schema, output, finish) with ajv + ajv-formats (full mode) and prints, per
// keyword, valid / samples and truncated. ajv divides doubles for multipleOf (0.07 / 0.01 =
// 7.000000000000001): decimal multipleOf samples are also counted under multipleOfPrecision 12,
// the ajv option for decimal divisors, and the line says how many plain ajv rejects.
// Usage: node schema_keywords_check.cjs SAMPLES.jsonl NPM_DIR
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const [file, npmDir] = process.argv.slice(2);
const M = (p) => require(path.join(npmDir, 'node_modules', p));
const Ajv2020 = M('ajv/dist/2020').default;
const addFormats = M('ajv-formats').default;

function compile(schema, precise) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false,
                            ...(precise ? { multipleOfPrecision: 12 } : {}) });
  addFormats(ajv, { mode: 'full' });
  return ajv.compile(schema);
}

const rows = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
const byKeyword = new Map();
for (const r of rows) {
  if (!byKeyword.has(r.keyword)) {
    byKeyword.set(r.keyword, { plain: compile(r.schema, false), precise: compile(r.schema, true),
                               n: 0, valid: 0, plainValid: 0, truncated: 0 });
  }
  const k = byKeyword.get(r.keyword);
  k.n += 1;
  if (r.finish !== 'stop') k.truncated += 1;
  let doc;
  try { doc = JSON.parse(r.output); } catch { continue; }
  if (r.finish === 'stop' && k.precise(doc)) k.valid += 1;
  if (r.finish === 'stop' && k.plain(doc)) k.plainValid += 1;
}
let bad = 0;
for (const [name, k] of byKeyword) {
  const note = k.plainValid !== k.valid ? ` (plain ajv, dividing doubles: ${k.plainValid}/${k.n})` : '';
  console.log(`  ${name.padEnd(28)} ${k.valid}/${k.n} valid, ${k.truncated} truncated${note}`);
  bad += k.n - k.valid;
}
console.log(`${byKeyword.size} keywords, ${rows.length} samples: ${bad} invalid or truncated`);
process.exit(bad === 0 ? 0 : 1);
