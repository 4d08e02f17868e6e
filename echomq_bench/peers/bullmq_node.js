// A cross-check outside the Python suite: BullMQ on Node (npm install bullmq@5.81) against one
// running server on loopback, the same shape as the bullmq peer: addBulk 1000 per call with
// removeOnComplete, then one Worker with the given concurrency until 'drained'. Prints server
// main-thread CPU and commands per job for each phase, from INFO deltas.
// Usage: node echomq/peers/bullmq_node.js PORT JOBS CONCURRENCY
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');
const port = +process.argv[2], N = +process.argv[3], conc = +process.argv[4];
const admin = new IORedis({ port, host: '127.0.0.1' });
function cpu(info) { const g = k => +info.match(new RegExp(k + ':([0-9.]+)'))[1]; return g('used_cpu_sys_main_thread') + g('used_cpu_user_main_thread'); }
function calls(info) { let t = 0; for (const m of info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)) if (m[1] !== 'info') t += +m[2]; return t; }
(async () => {
  const connection = { host: '127.0.0.1', port };
  const q = new Queue('peers', { connection, defaultJobOptions: { removeOnComplete: true } });
  await q.waitUntilReady();
  let c0 = cpu(await admin.info('cpu')), k0 = calls(await admin.info('commandstats')), t0 = Date.now();
  for (let s = 0; s < N; s += 1000) await q.addBulk(Array.from({ length: Math.min(1000, N - s) }, () => ({ name: 'noop', data: '0123456789abcdef'.repeat(4) })));
  let c1 = cpu(await admin.info('cpu')), k1 = calls(await admin.info('commandstats')), t1 = Date.now();
  console.log(`enqueue ${(N / (t1 - t0) * 1000).toFixed(0)}/s server ${((c1 - c0) / N * 1e6).toFixed(1)} us/job cmds ${((k1 - k0) / N).toFixed(1)}`);
  let ran = 0;
  const w = new Worker('peers', async () => { ran++; }, { connection, concurrency: conc, autorun: false });
  await w.waitUntilReady();
  const done = new Promise(r => w.on('drained', r));
  c0 = cpu(await admin.info('cpu')); k0 = calls(await admin.info('commandstats')); t0 = Date.now();
  w.run();
  await done;
  c1 = cpu(await admin.info('cpu')); k1 = calls(await admin.info('commandstats')); t1 = Date.now();
  console.log(`drain ran=${ran} ${(N / (t1 - t0) * 1000).toFixed(0)}/s server ${((c1 - c0) / N * 1e6).toFixed(1)} us/job cmds ${((k1 - k0) / N).toFixed(1)} wait=${await admin.llen('bull:peers:wait')}`);
  await w.close(); await q.close(); admin.disconnect();
})();
