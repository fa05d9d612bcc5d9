// A BullMQ Worker for inbox's end-to-end tests. It processes the jobs of one
// queue and appends a JSON line per job it processes to a file:
// {"id": job.id, "row_id": the row id job.id decodes to, "name": job.name,
//  "data_row_id", "attempt", "body_sha256": of the body's bytes}.
//
//   node worker.js REDIS_URL QUEUE PREFIX OUT_FILE
//
// It prints "ready" once it listens, and stops on SIGTERM, closing the worker.
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const { Worker } = require('bullmq');

const [url, queue, prefix, out] = process.argv.slice(2);
const u = new URL(url);
const connection = {
  host: u.hostname,
  port: Number(u.port || 6379),
  db: Number(u.pathname.slice(1) || 0),
  password: u.password ? decodeURIComponent(u.password) : undefined,
  maxRetriesPerRequest: null, // as BullMQ asks of a Worker's connection
};

const worker = new Worker(queue, async (job) => {
  const d = job.data;
  const body = d.body_base64 !== undefined ? Buffer.from(d.body_base64, 'base64') : Buffer.from(d.body, 'utf8');
  const line = JSON.stringify({
    id: job.id,
    row_id: decodeURIComponent(job.id),
    name: job.name,
    data_row_id: d.row_id,
    attempt: d.attempt,
    body_sha256: crypto.createHash('sha256').update(body).digest('hex'),
  });
  fs.appendFileSync(out, line + '\n');
}, { connection, prefix, concurrency: 16 });

worker.on('error', (err) => console.error('worker error:', err.message));
worker.waitUntilReady().then(() => console.log('ready'));

process.on('SIGTERM', async () => {
  await worker.close();
  process.exit(0);
});
