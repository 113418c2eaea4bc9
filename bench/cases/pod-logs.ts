// The pod log line path on one core: split -> parse -> join -> batch -> encode AgentMessages,
// for 100-byte lines, beside a raw baseline (splitting the same buffer into lines) in the same run:
// once in 64 KiB chunks (a log read after the fact) and once in 170-byte chunks (a followed log).
// One unmeasured warm-up pass of each, then ROUNDS rounds alternating baseline and pipeline,
// median of each.
import { performance } from 'node:perf_hooks';
import {
  ContainerLog,
  DEFAULT_INGEST_LIMITS,
} from '../../collector/sources/pod-logs/container-log.js';
import { LineSplitter } from '../../collector/sources/pod-logs/line-splitter.js';
import { encodeLogMessage } from '../../collector/sources/pod-logs/log-entry-encoder.js';
import { median, rate, type BenchCase, type BenchResult } from '../types.js';

const LINES = 300_000;
const ROUNDS = 3;
/** A read of a log that is already written: large chunks. */
const BULK_CHUNK_BYTES = 64 * 1024;
/**
 * A followed log: the kubelet writes line by line and the API server flushes each write, so
 * chunks hold one or two lines (170 bytes on average in the end-to-end case).
 */
const FOLLOW_CHUNK_BYTES = 170;

/** 100-byte lines: a 31-byte RFC3339Nano prefix, a space, a text payload, the newline. */
function logBody(): Buffer {
  const parts: string[] = [];
  for (let i = 0; i < LINES; i++) {
    const sec = 1_700_000_000 + Math.floor(i / 1000);
    const iso = new Date(sec * 1000).toISOString().replace('.000Z', '');
    const prefix = `${iso}.${String((i % 1000) * 1000).padStart(9, '0')}Z `;
    const text = `level=info request handled id=${String(i)} path=/api/v1/items status=200 `;
    parts.push(`${prefix}${text.padEnd(100 - prefix.length - 1, 'x')}\n`);
  }
  return Buffer.from(parts.join(''));
}

function chunks(body: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < body.length; i += size) out.push(body.subarray(i, i + size));
  return out;
}

function baseline(input: readonly Buffer[]): number {
  const start = performance.now();
  let lines = 0;
  let rest = '';
  for (const chunk of input) {
    const parts = (rest + chunk.toString('utf8')).split('\n');
    rest = parts.pop() ?? '';
    lines += parts.length;
  }
  if (lines !== LINES) throw new Error(`baseline split ${String(lines)} lines`);
  return rate(LINES, performance.now() - start);
}

function pipeline(input: readonly Buffer[]): number {
  const start = performance.now();
  const log = new ContainerLog({
    instance: { podUid: 'uid', container: 'app', restartCount: 0 },
    base: {
      podName: 'p',
      namespace: 'n',
      container: 'app',
      labels: { app: 'web' },
      workload: 'web',
      workloadKind: 'Deployment',
      nodeName: 'node',
    },
    saved: { position: undefined, intents: [] },
    limits: DEFAULT_INGEST_LIMITS,
    maxBatchEntries: 500,
    maxBatchBytes: 512 * 1024,
    nowMs: 0,
    onDrop: () => undefined,
  });
  const splitter = new LineSplitter(DEFAULT_INGEST_LIMITS.maxLineBytes + 64);
  let entries = 0;
  let bytes = 0;
  const encode = (): void => {
    for (const batch of log.takeBatches()) {
      entries += batch.entryCount;
      bytes += encodeLogMessage(
        { messageId: batch.messageId, clusterId: 'c-uid', agentId: 'a-1', timestampMs: 1 },
        batch.entries,
      ).length;
    }
  };
  const onLine = (text: string, cut: boolean): void => {
    log.accept(text, cut, 0);
  };
  log.beginConnection();
  for (const chunk of input) {
    splitter.push(chunk, onLine);
    if (log.hasFullBatch()) encode();
  }
  log.flushJoiner(0, false);
  encode();
  if (entries !== LINES || bytes === 0) throw new Error(`pipeline made ${String(entries)} entries`);
  return rate(LINES, performance.now() - start);
}

export const podLogsBench: BenchCase = {
  name: 'pod-logs',
  run(): Promise<BenchResult[]> {
    const body = logBody();
    const bulk = chunks(body, BULK_CHUNK_BYTES);
    const followed = chunks(body, FOLLOW_CHUNK_BYTES);
    for (const input of [bulk, followed]) {
      baseline(input);
      pipeline(input);
    }
    const rounds = {
      bulkBase: [] as number[],
      bulk: [] as number[],
      followedBase: [] as number[],
      followed: [] as number[],
    };
    for (let round = 0; round < ROUNDS; round++) {
      rounds.bulkBase.push(baseline(bulk));
      rounds.bulk.push(pipeline(bulk));
      rounds.followedBase.push(baseline(followed));
      rounds.followed.push(pipeline(followed));
    }
    return Promise.resolve([
      {
        name: 'split+parse+join+batch+encode (100 B)',
        itemsPerSecond: median(rounds.bulk),
        baselineName: 'raw line split',
        baselineItemsPerSecond: median(rounds.bulkBase),
        targetItemsPerSecond: 250_000,
      },
      {
        name: 'the same, in 170-byte chunks (followed)',
        itemsPerSecond: median(rounds.followed),
        baselineName: 'raw line split',
        baselineItemsPerSecond: median(rounds.followedBase),
      },
    ]);
  },
};
