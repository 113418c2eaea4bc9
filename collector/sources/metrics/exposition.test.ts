import { readFileSync } from 'node:fs';
import { Counter, Gauge, Histogram, Registry, Summary } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ExpositionError, formatOf, parseExposition, type Family } from './exposition.js';

const fixture = (name: string) =>
  readFileSync(new URL(`../../../test/fixtures/prometheus/${name}`, import.meta.url), 'utf8');

const byName = (families: Family[]) => new Map(families.map((f) => [f.name, f]));

describe('text format 0.0.4', () => {
  const families = byName(parseExposition(fixture('edge-cases.prom')));

  it('reads HELP escapes, TYPE, labels with escapes and millisecond timestamps', () => {
    const requests = families.get('http_requests_total');
    expect(requests?.type).toBe('counter');
    expect(requests?.help).toBe(
      'Requests served, with a backslash \\ and a newline \n in the help.',
    );
    expect(requests?.samples).toEqual([
      {
        name: 'http_requests_total',
        labels: { method: 'post', code: '200' },
        value: 1027,
        timestampMs: 1395066363000,
      },
      {
        name: 'http_requests_total',
        labels: { method: 'post', code: '400' },
        value: 3,
        timestampMs: 1395066363000,
      },
      {
        name: 'http_requests_total',
        labels: { path: 'C:\\DIR\\', quote: 'say "hi"', nl: 'a\nb' },
        value: 7,
      },
    ]);
  });

  it('accepts whitespace around labels and a trailing comma', () => {
    expect(families.get('spaced')?.samples[0]).toEqual({
      name: 'spaced',
      labels: { a: '1', b: '2' },
      value: 2.5,
    });
  });

  it('reads NaN, +Inf, -Inf and exponents', () => {
    const values = families.get('special')?.samples.map((s) => s.value);
    expect(values).toEqual([Number.NaN, Infinity, -Infinity, 0.0015, -0.25]);
  });

  it('makes untyped families of samples without TYPE, negative timestamps included', () => {
    expect(families.get('metric_without_timestamp_and_labels')).toMatchObject({
      type: 'untyped',
      samples: [{ value: 12.47, labels: {} }],
    });
    expect(families.get('something_weird')?.samples[0]).toMatchObject({
      value: Infinity,
      timestampMs: -3982045,
    });
  });

  it('groups summary and histogram samples under their family', () => {
    const summary = families.get('rpc_duration_seconds');
    expect(summary?.type).toBe('summary');
    expect(summary?.samples.map((s) => s.name)).toEqual([
      'rpc_duration_seconds',
      'rpc_duration_seconds',
      'rpc_duration_seconds',
      'rpc_duration_seconds_sum',
      'rpc_duration_seconds_count',
    ]);
    const histogram = families.get('http_request_duration_seconds');
    expect(histogram?.samples.map((s) => s.labels['le'] ?? s.name)).toEqual([
      '0.05',
      '0.1',
      '+Inf',
      'http_request_duration_seconds_sum',
      'http_request_duration_seconds_count',
    ]);
    expect(families.has('http_request_duration_seconds_bucket')).toBe(false);
  });

  it('reads a quoted UTF-8 metric name inside the braces', () => {
    expect(families.get('my.dotted.metric')).toMatchObject({
      type: 'gauge',
      samples: [{ name: 'my.dotted.metric', labels: { 'label.with.dots': 'ü' }, value: 1 }],
    });
  });

  it("parses prom-client's own registry output", async () => {
    const registry = new Registry();
    new Counter({
      name: 'jobs_total',
      help: 'Jobs "done"\\n',
      labelNames: ['queue'],
      registers: [registry],
    }).inc({ queue: 'a\\b"c\nd' }, 3);
    new Gauge({ name: 'temperature', help: 'x', registers: [registry] }).set(-1.5);
    const histogram = new Histogram({
      name: 'latency',
      help: 'h',
      buckets: [0.1, 1],
      registers: [registry],
    });
    histogram.observe(0.5);
    histogram.observe(5);
    new Summary({ name: 'sizes', help: 's', percentiles: [0.5], registers: [registry] }).observe(7);
    const parsed = byName(
      parseExposition(await registry.metrics(), formatOf(registry.contentType)),
    );
    expect(parsed.get('jobs_total')).toMatchObject({
      type: 'counter',
      help: 'Jobs "done"\\n',
      samples: [{ labels: { queue: 'a\\b"c\nd' }, value: 3 }],
    });
    expect(parsed.get('temperature')?.samples[0]?.value).toBe(-1.5);
    expect(parsed.get('latency')?.samples.map((s) => [s.name, s.labels['le'], s.value])).toEqual([
      ['latency_bucket', '0.1', 0],
      ['latency_bucket', '1', 1],
      ['latency_bucket', '+Inf', 2],
      ['latency_sum', undefined, 5.5],
      ['latency_count', undefined, 2],
    ]);
    expect(parsed.get('sizes')?.type).toBe('summary');
  });
});

describe('OpenMetrics 1.0', () => {
  const families = byName(parseExposition(fixture('openmetrics.txt'), 'openmetrics'));

  it('reads _total counters, _created, UNIT, second timestamps, and drops exemplars', () => {
    expect(families.get('process_cpu_seconds')).toMatchObject({
      type: 'counter',
      help: 'Total user and system CPU time spent in seconds.',
      samples: [
        { name: 'process_cpu_seconds_total', value: 4.20072246e6 },
        { name: 'process_cpu_seconds_created', value: 1605281325 },
      ],
    });
    expect(families.get('go_goroutines')?.samples[0]).toEqual({
      name: 'go_goroutines',
      labels: {},
      value: 69,
      timestampMs: 1605281325500,
    });
    expect(families.get('foo')?.samples).toHaveLength(5);
    expect(families.get('build')).toMatchObject({
      type: 'info',
      samples: [{ name: 'build_info' }],
    });
    expect(families.get('acme_http_router_request_seconds')?.samples).toHaveLength(3);
  });

  it('refuses a body without # EOF (truncated) and content after it', () => {
    expect(() => parseExposition('# TYPE a gauge\na 1\n', 'openmetrics')).toThrow(/without # EOF/);
    expect(() => parseExposition('a 1\n# EOF\nb 2\n', 'openmetrics')).toThrow(/after # EOF/);
  });

  it('picks the format from the Content-Type', () => {
    expect(formatOf('application/openmetrics-text; version=1.0.0; charset=utf-8')).toBe(
      'openmetrics',
    );
    expect(formatOf('text/plain; version=0.0.4')).toBe('text');
    expect(formatOf(undefined)).toBe('text');
  });
});

describe('malformed input fails with its line number', () => {
  it.each([
    ['a{b="c"', /line 1: .*expected , or }/],
    ['a{b="c} 1', /line 1: .*unterminated/],
    ['a{b=c} 1', /line 1: expected "/],
    ['a{b="\\q"} 1', /line 1: invalid escape \\q/],
    ['a{b="1",b="2"} 1', /line 1: label b repeated/],
    ['a one', /line 1: "one" is not a number/],
    ['a 1 12.5', /line 1: "12.5" is not a timestamp/],
    ['a 1 2 3', /line 1: unexpected text after the sample/],
    ['ok 1\n9bad 1', /line 2: expected a name/],
    ['# TYPE a bogus', /line 1: unknown type "bogus"/],
    ['a 1\nb 1\n# TYPE a gauge', /line 3: TYPE for a after its samples/],
    ['a{} ', /line 1: "" is not a number/],
    ['{} 1', /line 1: sample without a metric name/],
  ])('%j', (body, message) => {
    expect(() => parseExposition(body)).toThrow(ExpositionError);
    expect(() => parseExposition(body)).toThrow(message);
  });

  it('accepts an exemplar on a text-format line', () => {
    const [family] = parseExposition('a_total 1 # {trace="x"} 1.0\n');
    expect(family?.samples[0]?.value).toBe(1);
  });
});
