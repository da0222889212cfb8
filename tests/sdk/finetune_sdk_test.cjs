// The official `openai` npm SDK's fine-tuning API, unmodified, against a running `keel serve`
// (KEEL_BASE_URL) on stories260K served with a plain question/answer chat template
// (fixtures/qa_template.jinja: the model has none, and cannot learn ChatML's markup; see
// docs/finetune.md): files.create (purpose fine-tune), fineTuning.jobs.create, .retrieve until it
// succeeds (the statuses in order through .listEvents, metrics events with step and train_loss),
// checkpoints.list, the fine-tuned model in models.list, and issue 38's learning check through the
// API — greedy chat completions with model = job.fine_tuned_model reproduce at least 9 of the 10
// trained replies exactly through the end of turn, where the base model reproduces none. Then a
// second job, cancelled mid-run, is cancelled at once and takes no further step after 1 s.
// Exits non-zero on the first failed check.
'use strict';
const assert = require('node:assert/strict');
const OpenAI = require(process.env.OPENAI_MODULE || 'openai');

const client = new OpenAI({ baseURL: process.env.KEEL_BASE_URL, apiKey: 'sk-keel-test' });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The trainer's learning test's conversations (tests/train/finetune_test.cpp).
const conversations = [
  ['Who found the ball?', 'Tom found the red ball under the big tree in the park.'],
  ['What did the cat eat?', 'The little cat ate a fish and then went to sleep in the sun.'],
  ['Where is the dog?', 'The dog is in the garden. He is digging a hole to hide his bone.'],
  ['Why was Lily sad?', 'Lily was sad because her kite flew away into the sky.'],
  ['What did Ben build?', 'Ben built a tall tower with blue blocks, and it did not fall.'],
  ['Who has a new hat?', 'Mom has a new hat. It is pink and has a yellow flower on it.'],
  ['What is in the box?', 'There is a small toy car in the box. It is shiny and fast.'],
  ['How did the bird feel?', 'The bird was happy. It sang a song to all of its friends.'],
  ['What did Sue see?', 'Sue saw a big fish jump out of the water in the lake.'],
  ['Where did they go?', 'They went to the beach and made a castle out of sand.'],
];
const jsonl = conversations
  .map(([q, a]) => JSON.stringify({ messages: [{ role: 'user', content: q }, { role: 'assistant', content: a }] }))
  .join('\n') + '\n';

async function allEvents(id) {
  const out = [];
  for await (const e of client.fineTuning.jobs.listEvents(id, { limit: 100 })) out.push(e);
  return out.reverse();  // oldest first
}

async function waitFor(id, pred, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await client.fineTuning.jobs.retrieve(id);
    if (await pred(job) || Date.now() > deadline) return job;
    await sleep(100);
  }
}

// How many of the replies greedy decoding with `model` reproduces through the end of turn.
async function reproduced(model) {
  let n = 0;
  for (const [q, a] of conversations) {
    const r = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: q }], temperature: 0, max_tokens: 48, stop: ['\n'],
    });
    const c = r.choices[0];
    if (c.finish_reason === 'stop' && c.message.content.trim() === a) n++;
  }
  return n;
}

async function lifecycle(fileId) {
  const created = await client.fineTuning.jobs.create({
    model: 'stories', training_file: fileId, seed: 3, suffix: 'qa',
    method: { type: 'supervised', supervised: { hyperparameters: { n_epochs: 20, batch_size: 1, learning_rate_multiplier: 10 } } },
  });
  assert.equal(created.object, 'fine_tuning.job');
  assert.equal(created.status, 'validating_files');
  const t0 = Date.now();
  const job = await waitFor(created.id, (j) => ['succeeded', 'failed', 'cancelled'].includes(j.status), 240_000);
  assert.equal(job.status, 'succeeded', JSON.stringify(job));
  console.log(`job ${job.id}: ${job.fine_tuned_model} in ${((Date.now() - t0) / 1000).toFixed(1)} s, ${job.trained_tokens} tokens`);
  assert.ok(job.fine_tuned_model.startsWith('ft:stories:keel:qa:'));
  assert.deepEqual(job.hyperparameters, { n_epochs: 20, batch_size: 1, learning_rate_multiplier: 10 });
  assert.ok(job.trained_tokens > 0 && job.trained_tokens <= 20000);
  assert.equal(job.result_files.length, 1);

  const events = await allEvents(job.id);
  const at = (prefix) => events.findIndex((e) => e.message.startsWith(prefix));
  const order = ['Validating training file', 'Files validated', 'Fine-tuning job started',
    'New fine-tuned model created', 'The job has successfully completed'].map(at);
  assert.ok(order.every((i, k) => i >= 0 && (k === 0 || i > order[k - 1])), JSON.stringify(order));
  const metrics = events.filter((e) => e.type === 'metrics');
  assert.equal(metrics.length, 200);
  metrics.forEach((e, i) => {
    assert.equal(e.object, 'fine_tuning.job.event');
    assert.equal(e.data.step, i + 1);
    assert.equal(typeof e.data.train_loss, 'number');
  });
  const first = metrics.slice(0, 10).reduce((s, e) => s + e.data.train_loss, 0);
  const last = metrics.slice(-10).reduce((s, e) => s + e.data.train_loss, 0);
  assert.ok(last <= 0.5 * first, `loss ${first / 10} -> ${last / 10}`);

  const checkpoints = [];
  for await (const c of client.fineTuning.jobs.checkpoints.list(job.id)) checkpoints.push(c);
  assert.equal(checkpoints.length, 3);  // the last three epochs
  assert.equal(checkpoints[0].step_number, 200);
  for (const c of checkpoints) {
    assert.equal(c.object, 'fine_tuning.job.checkpoint');
    assert.ok(c.fine_tuned_model_checkpoint.startsWith(job.fine_tuned_model + ':ckpt-step-'));
    assert.equal(typeof c.metrics.train_loss, 'number');
    assert.equal(c.metrics.step, c.step_number);
  }
  const models = (await client.models.list()).data.map((m) => m.id);
  assert.ok(models.includes(job.fine_tuned_model) && models.includes(checkpoints[0].fine_tuned_model_checkpoint));

  const tuned = await reproduced(job.fine_tuned_model);
  const base = await reproduced('stories');
  console.log(`replies reproduced: ${tuned}/10 with the fine-tuned model, ${base}/10 with the base`);
  assert.ok(tuned >= 9);
  assert.equal(base, 0);
}

async function cancelMidRun(fileId) {
  const job = await client.fineTuning.jobs.create({
    model: 'stories', training_file: fileId, hyperparameters: { n_epochs: 50 },
  });
  const running = await waitFor(job.id, async (j) => j.status === 'running' &&
    (await client.fineTuning.jobs.listEvents(j.id, { limit: 5 })).data.some((e) => e.type === 'metrics'), 60_000);
  assert.equal(running.status, 'running');
  const t0 = Date.now();
  const cancelled = await client.fineTuning.jobs.cancel(job.id);
  assert.equal(cancelled.status, 'cancelled');
  assert.ok(Date.now() - t0 < 1000);
  await sleep(1000);
  const steps = async () => (await allEvents(job.id)).filter((e) => e.type === 'metrics').length;
  const after1s = await steps();
  await sleep(500);
  assert.equal(await steps(), after1s, 'a step was taken more than 1 s after the cancel');
  assert.ok(after1s < 500);
  assert.equal((await client.fineTuning.jobs.retrieve(job.id)).status, 'cancelled');
  await assert.rejects(client.fineTuning.jobs.retrieve('ftjob-nope'), (e) => e instanceof OpenAI.NotFoundError);
}

(async () => {
  const file = await client.files.create({ file: await OpenAI.toFile(Buffer.from(jsonl), 'qa.jsonl'), purpose: 'fine-tune' });
  assert.equal(file.purpose, 'fine-tune');
  await lifecycle(file.id);
  await cancelMidRun(file.id);
  console.log('finetune sdk test: ok');
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
