import { describe, expect, it } from 'vitest';
import { LogLevel } from '../../../proto/index.js';
import { Joiner, type LogRecord, type PositionedLine } from './joiner.js';
import { levelFromText, levelFromValue } from './level.js';
import { LineSplitter, type SplitLine } from './line-splitter.js';
import { lineTimeToNs, parseLineTime } from './line-time.js';
import { parseLine } from './parse-line.js';
import { TokenBucket } from './rate-limiter.js';
import { truncateUtf8 } from './truncate.js';

const { LOG_LEVEL_UNSPECIFIED: NONE, LOG_LEVEL_DEBUG: DEBUG, LOG_LEVEL_INFO: INFO } = LogLevel;
const { LOG_LEVEL_WARN: WARN, LOG_LEVEL_ERROR: ERROR } = LogLevel;

describe('parseLineTime', () => {
  it.each([
    ['2024-01-02T03:04:05.123456789Z', '1704164645123456789'],
    ['2024-01-02T03:04:05.1Z', '1704164645100000000'],
    ['2024-01-02T03:04:05Z', '1704164645000000000'],
    ['2024-01-02T04:04:05.000000001+01:00', '1704164645000000001'],
  ])('parses %s to %s ns', (text, ns) => {
    const time = parseLineTime(text);
    expect(time && lineTimeToNs(time)).toBe(ns);
  });

  it.each(['2024-01-02 03:04:05Z', 'not a time', '2024-01-02T03:04:05.1234567891Z'])(
    'refuses %s',
    (text) => {
      expect(parseLineTime(text)).toBeUndefined();
    },
  );
});

describe('parseLine', () => {
  const ts = '2024-01-02T03:04:05.000000001Z';
  it.each([
    { line: `${ts} hello`, raw: 'hello', message: 'hello', level: NONE, json: false },
    {
      line: `${ts}   indented\r`,
      raw: '  indented',
      message: '  indented',
      level: NONE,
      json: false,
    },
    {
      line: `${ts} {"level":"warn","msg":"disk low","n":1}`,
      raw: '{"level":"warn","msg":"disk low","n":1}',
      message: 'disk low',
      level: WARN,
      json: true,
    },
    {
      line: `${ts} {"level":50,"message":"boom"}`,
      raw: '{"level":50,"message":"boom"}',
      message: 'boom',
      level: ERROR,
      json: true,
    },
    {
      line: `${ts} {"severity":"INFO"}`,
      raw: '{"severity":"INFO"}',
      message: '{"severity":"INFO"}',
      level: INFO,
      json: true,
    },
    { line: `${ts} {not json`, raw: '{not json', message: '{not json', level: NONE, json: true },
    {
      line: 'no prefix here',
      raw: 'no prefix here',
      message: 'no prefix here',
      level: NONE,
      json: false,
    },
  ])('$line', ({ line, raw, message, level, json }) => {
    const parsed = parseLine(line, 1024);
    expect(parsed).toMatchObject({ raw, message, level, isJson: json, truncated: false });
    expect(parsed.time === undefined).toBe(line.startsWith('no prefix'));
  });

  it('truncates the payload at maxLineBytes and flags it', () => {
    const parsed = parseLine(`${ts} ${'é'.repeat(10)}`, 5);
    expect(parsed).toMatchObject({ raw: 'éé', truncated: true });
  });

  it('flags a line the reader already cut', () => {
    expect(parseLine(`${ts} abc`, 100, true).truncated).toBe(true);
  });
});

describe('levelFromText', () => {
  it.each([
    ['level=error msg=x', ERROR],
    ['time=1 lvl=DEBUG x', DEBUG],
    ['[WARN] something', WARN],
    ['2024-01-02 10:00:00 INFO server started', INFO],
    ['ERROR: failed', ERROR],
    ['E0102 03:04:05.123456 1 main.go:1] x', ERROR],
    ['W0102 03:04:05.123456 1 main.go:1] x', WARN],
    ['I0102 03:04:05.123456 1 main.go:1] x', INFO],
    ['FATAL boom', ERROR],
    ['information only, nothing to see', NONE],
    ['an error happened in lowercase', NONE],
    ['plain line', NONE],
    [`${'x'.repeat(100)} ERROR late`, NONE],
    // Object.prototype's member names are no level words.
    ['level=constructor msg=x', NONE],
    ['lvl=__proto__ x', NONE],
    ['level=toString x', NONE],
  ])('%s', (text, level) => {
    expect(levelFromText(text)).toBe(level);
  });

  it.each(['constructor', '__proto__', 'hasOwnProperty', 'valueOf'])(
    'a JSON level of %s is no level',
    (word) => {
      expect(levelFromValue(word)).toBe(NONE);
      expect(parseLine(`{"level":"${word}","msg":"m"}`, 0).level).toBe(NONE);
    },
  );
});

describe('truncateUtf8', () => {
  it.each([
    { text: 'hello', max: 10, out: 'hello', cut: false },
    { text: 'hello', max: 5, out: 'hello', cut: false },
    { text: 'hello!', max: 5, out: 'hello', cut: true },
    { text: 'aé', max: 2, out: 'a', cut: true },
    { text: 'a€b', max: 3, out: 'a', cut: true },
    { text: 'a€b', max: 4, out: 'a€', cut: true },
    { text: '😀😀', max: 7, out: '😀', cut: true },
    { text: '😀😀', max: 8, out: '😀😀', cut: false },
    { text: 'anything', max: 0, out: 'anything', cut: false },
  ])('$text at $max bytes', ({ text, max, out, cut }) => {
    expect(truncateUtf8(text, max)).toEqual({ text: out, truncated: cut });
  });
});

/** Every line the splitter completes for these chunks, and the counts push() returned. */
function split(splitter: LineSplitter, chunks: readonly string[]): SplitLine[] {
  const lines: SplitLine[] = [];
  for (const chunk of chunks) {
    const before = lines.length;
    const count = splitter.push(Buffer.from(chunk), (text, cut) => lines.push({ text, cut }));
    expect(count).toBe(lines.length - before);
  }
  return lines;
}

describe('LineSplitter', () => {
  it('splits across chunks and returns a final unterminated line', () => {
    const splitter = new LineSplitter(100);
    const lines = split(splitter, ['a\nb', 'c\n\nd']);
    expect(lines).toEqual([
      { text: 'a', cut: false },
      { text: 'bc', cut: false },
      { text: '', cut: false },
    ]);
    expect(splitter.end()).toEqual({ text: 'd', cut: false });
    expect(splitter.end()).toBeUndefined();
  });

  it('drops bytes past the cap up to the newline and resynchronises', () => {
    const splitter = new LineSplitter(4);
    const lines = split(splitter, ['abcdefgh', 'ij\nok\n']);
    expect(lines).toEqual([
      { text: 'abcd', cut: true },
      { text: 'ok', cut: false },
    ]);
  });

  it('never ends a cut line inside a UTF-8 sequence', () => {
    const splitter = new LineSplitter(3);
    expect(split(splitter, ['a€€\n'])).toEqual([{ text: 'a', cut: true }]);
  });
});

function joinAll(texts: readonly string[], joiner = new Joiner()): LogRecord[] {
  const out: LogRecord[] = [];
  texts.forEach((text, i) => {
    const line = parseLine(text, 0);
    const positioned: PositionedLine = {
      line,
      time: { sec: 100, nanos: i },
      position: { sec: 100, nanos: i, count: 1 },
      readAtMs: 0,
    };
    const done = joiner.add(positioned);
    if (done) out.push(done);
  });
  const last = joiner.flush();
  if (last) out.push(last);
  return out;
}

describe('Joiner', () => {
  it.each([
    {
      name: 'Java with Caused by and ... more',
      lines: [
        'Exception in thread "main" java.lang.IllegalStateException: boom',
        '\tat com.example.App.run(App.java:10)',
        'Caused by: java.io.IOException: disk',
        '\t... 3 more',
        'next record',
      ],
      records: [4, 1],
    },
    {
      name: 'Python traceback with its final exception line',
      lines: [
        'Traceback (most recent call last):',
        '  File "app.py", line 1, in <module>',
        '    main()',
        'ValueError: bad value',
        'next record',
      ],
      records: [4, 1],
    },
    {
      name: 'Go panic with unindented frames',
      lines: [
        'panic: boom',
        'goroutine 1 [running]:',
        'main.main()',
        '\t/app/main.go:5 +0x1d',
        'created by main.start',
        'next record',
      ],
      records: [5, 1],
    },
    {
      name: 'Node error with at frames',
      lines: ['Error: boom', '    at f (/app/x.js:1:2)', '    at g (/app/x.js:3:4)', 'next'],
      records: [3, 1],
    },
    {
      name: 'JSON lines are never joined, even when indented',
      lines: ['{"msg":"a"}', '  {"msg":"b"}', '\tplain indented after json'],
      records: [1, 1, 1],
    },
    {
      name: 'an unindented exception name outside a traceback starts a record',
      lines: ['hello', 'ValueError: x'],
      records: [1, 1],
    },
  ])('$name', ({ lines, records }) => {
    const joined = joinAll(lines);
    expect(joined.map((r) => r.lines)).toEqual(records);
    expect(joined[0]?.raw).toBe(lines.slice(0, records[0]).join('\n'));
    expect(joined[0]?.end.nanos).toBe((records[0] ?? 0) - 1);
  });

  it('stops extending a record at maxRecordBytes', () => {
    const joiner = new Joiner({ maxRecordBytes: 25, holdMs: 2_000 });
    const joined = joinAll(['Error: x', '  at aaaaaaa', '  at bbbbbbb'], joiner);
    expect(joined.map((r) => r.lines)).toEqual([2, 1]);
  });

  it('does not join a line stamped later than the hold window', () => {
    const joiner = new Joiner();
    const at = (sec: number, text: string): PositionedLine => ({
      line: parseLine(text, 0),
      time: { sec, nanos: 0 },
      position: { sec, nanos: 0, count: 1 },
      readAtMs: 0,
    });
    expect(joiner.add(at(1, 'Error: x'))).toBeUndefined();
    expect(joiner.add(at(4, '  at late'))?.lines).toBe(1);
  });

  it('flushIdle emits a record idle for holdMs of wall time, and only then', () => {
    const joiner = new Joiner();
    joinAll([], joiner);
    joiner.add({
      line: parseLine('Error: x', 0),
      time: { sec: 1, nanos: 0 },
      position: { sec: 1, nanos: 0, count: 1 },
      readAtMs: 1_000,
    });
    expect(joiner.flushIdle(2_999)).toBeUndefined();
    expect(joiner.flushIdle(3_000)?.raw).toBe('Error: x');
    expect(joiner.flush()).toBeUndefined();
  });
});

describe('TokenBucket', () => {
  it.each([
    { name: 'unlimited when rate is 0', rate: 0, burst: 100, steps: [[0, 1e6]], admitted: [true] },
    {
      name: 'burst then refill at the rate',
      rate: 10,
      burst: 20,
      steps: [
        [0, 15],
        [0, 10],
        [500, 10],
        [500, 1],
        [2_500, 20],
        [2_500, 1],
      ],
      admitted: [true, false, true, false, true, false],
    },
    {
      name: 'a line larger than the burst is always refused',
      rate: 10,
      burst: 5,
      steps: [
        [0, 6],
        [10_000, 6],
      ],
      admitted: [false, false],
    },
  ])('$name', ({ rate, burst, steps, admitted }) => {
    const bucket = new TokenBucket({ ratePerSecond: rate, burst }, 0);
    expect(steps.map(([now, cost]) => bucket.tryTake(cost ?? 0, now ?? 0))).toEqual(admitted);
  });
});
