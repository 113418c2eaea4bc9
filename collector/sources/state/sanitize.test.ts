// Sanitizing: managedFields and kubectl's last-applied annotation always go, from every object;
// a Secret's data and stringData go only with redaction on, and only from core Secrets.
import { describe, expect, it } from 'vitest';
import { AgentMessage, EventType, ResourceKind } from '../../../proto/index.js';
import type { KubeObject } from '../../watch/kube-list-watch.js';
import { LAST_APPLIED_ANNOTATION, sanitizeObject } from './sanitize.js';
import { encodeStateEvent, toStateRecord } from './state-event.js';

function applied(kind: string, extra: Record<string, unknown>): KubeObject {
  return {
    apiVersion: 'v1',
    kind,
    metadata: {
      name: 'x',
      namespace: 'ns',
      uid: 'u',
      resourceVersion: '7',
      labels: { app: 'a' },
      managedFields: [{ manager: 'kubectl' }],
      annotations: { [LAST_APPLIED_ANNOTATION]: '{"data":{"password":"c2VjcmV0"}}' },
    },
    ...extra,
  };
}

const SECRETS = { group: '', resource: 'secrets' };

describe('sanitizeObject', () => {
  it('always strips managedFields and the last-applied annotation (dropping annotations left empty)', () => {
    const object = sanitizeObject(
      applied('ConfigMap', { data: { a: '1' } }),
      { group: '', resource: 'configmaps' },
      { redactSecrets: true },
    );
    expect(object.metadata).toEqual({
      name: 'x',
      namespace: 'ns',
      uid: 'u',
      resourceVersion: '7',
      labels: { app: 'a' },
    });
    expect(object['data']).toEqual({ a: '1' });
  });

  it('keeps other annotations', () => {
    const object = applied('ConfigMap', {});
    object.metadata = {
      ...object.metadata,
      annotations: { [LAST_APPLIED_ANNOTATION]: '{}', keep: 'me' },
    };
    expect(
      sanitizeObject(object, { group: '', resource: 'configmaps' }, { redactSecrets: false })
        .metadata?.annotations,
    ).toEqual({ keep: 'me' });
  });

  it('keeps Secret data with redaction off, and strips the annotation copy of it either way', () => {
    const kept = sanitizeObject(applied('Secret', { data: { password: 'c2VjcmV0' } }), SECRETS, {
      redactSecrets: false,
    });
    expect(kept['data']).toEqual({ password: 'c2VjcmV0' });
    expect(JSON.stringify(kept.metadata)).not.toContain('c2VjcmV0');
    const redacted = sanitizeObject(
      applied('Secret', { data: { password: 'c2VjcmV0' }, stringData: { b: 'c' } }),
      SECRETS,
      { redactSecrets: true },
    );
    expect(JSON.stringify(redacted)).not.toContain('c2VjcmV0');
    expect(redacted['stringData']).toBeUndefined();
  });

  it('redacts only core Secrets: a CRD named secrets keeps its data', () => {
    const object = sanitizeObject(
      { data: { a: 1 } },
      { group: 'example.com', resource: 'secrets' },
      { redactSecrets: true },
    );
    expect(object['data']).toEqual({ a: 1 });
  });
});

describe('encodeStateEvent', () => {
  it('fills the StateEvent as the wire table says (kind enum, api_version, plural resource, labels, JSON object)', () => {
    const record = toStateRecord(
      sanitizeObject(
        applied('Deployment', { spec: { replicas: 1 } }),
        { group: 'apps', resource: 'deployments' },
        { redactSecrets: false },
      ),
    );
    const bytes = encodeStateEvent(
      { messageId: 'm1', type: 'MODIFIED', record, now: 1234 },
      { clusterId: 'c', agentId: 'a', group: 'apps', version: 'v1', resource: 'deployments' },
    );
    const message = AgentMessage.decode(bytes);
    expect(message.messageId).toBe('m1');
    expect(message.meta).toMatchObject({ clusterId: 'c', agentId: 'a', timestamp: '1234' });
    if (message.payload?.$case !== 'state') throw new Error('not a state payload');
    const event = message.payload.value;
    expect(event).toMatchObject({
      type: EventType.EVENT_TYPE_MODIFIED,
      kind: ResourceKind.RESOURCE_KIND_DEPLOYMENT,
      name: 'x',
      namespace: 'ns',
      timestamp: '1234',
      labels: { app: 'a' },
      apiVersion: 'apps/v1',
      resource: 'deployments',
    });
    expect(JSON.parse(Buffer.from(event.object).toString('utf8'))).toMatchObject({
      spec: { replicas: 1 },
    });
    const crd = AgentMessage.decode(
      encodeStateEvent(
        { messageId: 'm2', type: 'ADDED', record, now: 1 },
        {
          clusterId: 'c',
          agentId: 'a',
          group: 'example.com',
          version: 'v1beta1',
          resource: 'widgets',
        },
      ),
    );
    expect(crd.payload?.$case === 'state' && crd.payload.value).toMatchObject({
      kind: ResourceKind.RESOURCE_KIND_UNSPECIFIED,
      apiVersion: 'example.com/v1beta1',
      resource: 'widgets',
    });
  });
});
