// One child process of the peers runner for `bullmq-node`: BullMQ on Node, one producer or one consumer.
// It speaks the runner's line protocol (see echomq_bench/peers/__main__.py): stdin gives a JSON config
// line, then `go`, then (consumers) `stop`; stdout says `ready`, `progress N`, `done T`, `result {...}`,
// or `missing`/`error MESSAGE`. T is CLOCK_MONOTONIC in seconds, the clock of Python's perf_counter.
// Usage: node bullmq_peer.js NODE_MODULES_DIR   (setup.sh installs BullMQ there with npm ci)
'use strict';
const path = require('path');
const readline = require('readline');

const PAYLOAD = '0123456789abcdef'.repeat(4);
const ADD_BATCH = 1000;
const PROGRESS_MS = 5;
// Worker concurrency per mode, as in echomq_bench/peers/bullmq.py: BullMQ's default, and 100 in flight.
const CONCURRENCY = { default: 1, throughput: 100 };
const out = (line) => process.stdout.write(line + '\n');
console.log = console.error; // a library's log line must not land in the protocol
const now = () => Number(process.hrtime.bigint()) / 1e9;
const cpuS = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };

function load(dir) {
  try {
    return { bullmq: require(path.join(dir, 'bullmq')) };
  } catch (err) {
    out(`missing the bullmq npm package is not installed in ${dir} (${err.code || err.message}); run: bash setup.sh`);
    process.exit(3);
  }
}

function connection(url) {
  const u = new URL(url);
  return { host: u.hostname, port: +u.port || 6379, db: +(u.pathname.slice(1) || 0),
           username: decodeURIComponent(u.username) || undefined, password: decodeURIComponent(u.password) || undefined };
}

async function produce(bullmq, cfg, lines, tally) {
  const q = new bullmq.Queue(cfg.queue, { connection: connection(cfg.url), prefix: 'bull',
                                          defaultJobOptions: { removeOnComplete: true } });
  await q.waitUntilReady();
  out('ready'); await lines.next(); tally.start();
  let sent = 0;
  while (sent < cfg.n) {
    const size = Math.min(ADD_BATCH, cfg.n - sent);
    await q.addBulk(Array.from({ length: size }, () => ({ name: 'noop', data: PAYLOAD })));
    sent += size;
    out(`progress ${sent}`);
  }
  tally.done(now());
  await q.close();
  return { accepted: sent };
}

async function consume(bullmq, cfg, lines, tally) {
  const w = new bullmq.Worker(cfg.queue, async (job) => { tally.run(job.data); },
    { connection: connection(cfg.url), prefix: 'bull', concurrency: CONCURRENCY[cfg.mode], autorun: false,
      removeOnComplete: { count: 0 } });
  await w.waitUntilReady();
  out('ready'); await lines.next(); tally.start();
  const ticker = setInterval(() => tally.report(), PROGRESS_MS);
  w.run();
  await lines.next(); // `stop`: the consumers together have run every job
  clearInterval(ticker);
  await w.close();
  tally.done(tally.ran ? tally.lastAt : now());
  return {};
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin });
  const lines = rl[Symbol.asyncIterator]();
  const cfg = JSON.parse((await lines.next()).value);
  const { bullmq } = load(process.argv[2]);
  const tally = {
    ran: 0, intact: 0, lastAt: 0, reported: -1, cpuGo: 0, tGo: 0, tDone: 0, cpuDone: 0,
    start() { this.cpuGo = cpuS(); this.tGo = now(); },
    run(data) { this.ran++; this.lastAt = now(); if (data === PAYLOAD) this.intact++; },
    report() { if (this.ran !== this.reported) { this.reported = this.ran; out(`progress ${this.ran}`); } },
    done(at) { this.tDone = at; this.cpuDone = cpuS(); out(`done ${at}`); },
  };
  const result = await (cfg.role === 'produce' ? produce : consume)(bullmq, cfg, lines, tally);
  out('result ' + JSON.stringify({ ...result, ran: tally.ran, intact: tally.intact,
    cpu_s: tally.cpuDone - tally.cpuGo, t_go: tally.tGo, t_done: tally.tDone }));
  rl.close();
  process.exit(0);
}

main().catch((err) => { console.error(err); out(`error ${String(err && err.message || err).replace(/\n/g, ' ')}`); process.exit(1); });
