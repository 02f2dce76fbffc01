import path from 'node:path';
import { Value } from '@sinclair/typebox/value';
import { describe, expect, it } from 'vitest';
import { ConfigError, ConfigSchema, loadConfig, shutdownDeadlineMs } from '../../src/config.js';

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig({});
    expect(c.node).toEqual({
      url: 'https://api.trongrid.io',
      apiKey: undefined,
      timeoutMs: 10_000,
      retries: 6,
      concurrency: 8,
      maxRps: 10,
      providers: [
        {
          url: 'https://api.trongrid.io',
          name: 'https://api.trongrid.io',
          apiKey: undefined,
          maxRps: 10,
          // TronGrid's documented gRPC solidity endpoint: exact bytes by default (issue 26).
          grpc: { host: 'grpc.trongrid.io', port: 50052, tls: false },
          // Its full node service (protocol.Wallet), for blocks above the solidified head.
          grpcFull: { host: 'grpc.trongrid.io', port: 50051, tls: false },
        },
      ],
      quorum: 1,
      allowUnprovenSingleProvider: false,
      // One provider's word is not delivered by default (issue 36 item 5).
      deliverProviderProof: false,
    });
    expect(c.database.url).toBeUndefined();
    expect(c.database.poolSize).toBe(10);
    expect(c.dataDir).toBe(path.resolve('.tronwatch'));
    expect(c.database.embeddedDir).toBe(path.join(path.resolve('.tronwatch'), 'pgdata'));
    expect(c.http).toEqual({ host: '0.0.0.0', port: 8080, trustProxy: [] });
    expect(c.metrics).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(c.network).toBe('mainnet');
  });

  it('caps node requests at 10/s for a remote node and not for a loopback one unless told', () => {
    for (const url of ['https://api.trongrid.io', 'http://10.0.0.5:8090', 'https://127.example']) {
      expect(loadConfig({ TRON_NODE_URL: url }).node.maxRps, url).toBe(10);
    }
    for (const url of ['http://127.0.0.1:8090', 'http://localhost:8090', 'http://[::1]:8090']) {
      expect(loadConfig({ TRON_NODE_URL: url }).node.maxRps, url).toBe(0);
    }
    expect(loadConfig({ TRON_NODE_MAX_RPS: '25' }).node.maxRps).toBe(25);
    expect(
      loadConfig({ TRON_NODE_URL: 'http://127.0.0.1:8090', TRON_NODE_MAX_RPS: '3' }).node.maxRps,
    ).toBe(3);
    expect(loadConfig({ TRON_NODE_MAX_RPS: '0' }).node.maxRps).toBe(0);
    for (const bad of ['-1', '1.5', '0x10', '10001', 'ten']) {
      expect(() => loadConfig({ TRON_NODE_MAX_RPS: bad }), bad).toThrow(ConfigError);
    }
  });

  it('reads INGEST_START_BLOCK as number or number:blockID (a checkpoint), refusing an id of another block', () => {
    const id = '0000000004b68b6be6d7223b1ecf2850f00f700292beeead2810c18e9e1548e2';
    expect(loadConfig({ INGEST_START_BLOCK: '79072107' }).ingest).toMatchObject({
      startBlock: 79_072_107,
      startBlockId: undefined,
    });
    expect(loadConfig({ INGEST_START_BLOCK: `79072107:${id.toUpperCase()}` }).ingest).toMatchObject(
      { startBlock: 79_072_107, startBlockId: id },
    );
    expect(() => loadConfig({ INGEST_START_BLOCK: `79072108:${id}` })).toThrow(
      /is not the id of block 79072108/,
    );
    expect(() => loadConfig({ INGEST_START_BLOCK: '79072107:abc' })).toThrow(ConfigError);
  });

  it('reads several providers, each with its own key, cap and gRPC address, and a quorum', () => {
    const c = loadConfig({
      TRON_NODE_URL:
        ' http://10.0.0.5:8090#grpc=grpc://10.0.0.5:50061 , https://api.trongrid.io/#key=abc&max_rps=15&grpc=grpcs://grpc.trongrid.io:443,https://api.trongrid.io,https://api.trongrid.io#grpc=none',
      TRON_NODE_QUORUM: '2',
      TRON_NODE_MAX_RPS: '7',
    });
    expect(c.node.quorum).toBe(2);
    expect(c.node.providers).toEqual([
      {
        url: 'http://10.0.0.5:8090',
        name: 'http://10.0.0.5:8090',
        apiKey: undefined,
        maxRps: 7,
        grpc: { host: '10.0.0.5', port: 50061, tls: false },
      },
      {
        url: 'https://api.trongrid.io',
        name: 'https://api.trongrid.io',
        apiKey: 'abc',
        maxRps: 15,
        grpc: { host: 'grpc.trongrid.io', port: 443, tls: true },
      },
      {
        url: 'https://api.trongrid.io',
        name: 'https://api.trongrid.io#2',
        apiKey: undefined,
        maxRps: 7,
        grpc: { host: 'grpc.trongrid.io', port: 50052, tls: false },
        grpcFull: { host: 'grpc.trongrid.io', port: 50051, tls: false },
      },
      {
        url: 'https://api.trongrid.io',
        name: 'https://api.trongrid.io#3',
        apiKey: undefined,
        maxRps: 7,
        grpc: undefined,
      },
    ]);
    // A java-tron node's two gRPC ports: solidity (#grpc=) and full node (#grpc_full=).
    expect(
      loadConfig({
        TRON_NODE_URL:
          'http://10.0.0.5:8090#grpc=grpc://10.0.0.5:50061&grpc_full=grpc://10.0.0.5:50051',
      }).node.providers[0],
    ).toMatchObject({
      grpc: { host: '10.0.0.5', port: 50061, tls: false },
      grpcFull: { host: '10.0.0.5', port: 50051, tls: false },
    });
    // The first provider is also the single-node view (scan, record).
    expect(c.node.url).toBe('http://10.0.0.5:8090');
    // A lone URL keeps TRON_API_KEY; the key never rides along to another host.
    expect(loadConfig({ TRON_API_KEY: 'k' }).node.providers[0]?.apiKey).toBe('k');
    const bad: Array<[Record<string, string>, RegExp]> = [
      [{ TRON_NODE_URL: 'http://a:1,http://b:2', TRON_API_KEY: 'k' }, /TRON_API_KEY: with several/],
      [{ TRON_NODE_URL: 'http://a:1', TRON_NODE_QUORUM: '2' }, /TRON_NODE_QUORUM: 2 is more than/],
      [{ TRON_NODE_URL: 'http://a:1#grpc=a:1' }, /grpc must be grpc:\/\/host:port/],
      [
        { TRON_NODE_URL: 'http://a:1#grpc=grpc://a:2&grpc_full=a:3' },
        /grpc_full must be grpc:\/\/host:port/,
      ],
      [{ TRON_NODE_URL: 'http://a:1#grpc_full=grpc://a:3' }, /grpc_full needs grpc/],
      [{ TRON_NODE_URL: 'http://a:1#secret=1' }, /unknown setting #secret/],
      [{ TRON_NODE_URL: 'http://a:1,ftp://b' }, /provider 2: must start with http/],
      [{ TRON_NODE_URL: 'http://a:1#max_rps=ten' }, /max_rps must be digits/],
    ];
    for (const [env, re] of bad) expect(() => loadConfig(env), JSON.stringify(env)).toThrow(re);
  });

  it("gives TronGrid's Nile its gRPC solidity endpoint by default, and TRON_TESTNET_NODE_URL never TRON_API_KEY", () => {
    const c = loadConfig({
      TRON_API_KEY: 'k',
      TRON_TESTNET_NODE_URL: 'https://nile.trongrid.io',
    });
    expect(c.testnetNode?.providers).toEqual([
      {
        url: 'https://nile.trongrid.io',
        name: 'https://nile.trongrid.io',
        apiKey: undefined,
        maxRps: 10,
        // Not on TronGrid's own page; what public TRON clients use (src/config.ts TRONGRID_GRPC).
        grpc: { host: 'grpc.nile.trongrid.io', port: 50052, tls: false },
        grpcFull: { host: 'grpc.nile.trongrid.io', port: 50051, tls: false },
      },
    ]);
    expect(c.testnetNode?.quorum).toBe(1);
    // Another gRPC address, or none, when told.
    expect(
      loadConfig({ TRON_TESTNET_NODE_URL: 'https://nile.trongrid.io#grpc=none' }).testnetNode
        ?.providers[0]?.grpc,
    ).toBeUndefined();
    expect(
      loadConfig({
        TRON_TESTNET_NODE_URL: 'https://nile.trongrid.io#grpc=grpcs://nile.example:443',
      }).testnetNode?.providers[0]?.grpc,
    ).toEqual({ host: 'nile.example', port: 443, tls: true });
    // Only TronGrid's hosts get one: another Nile node names its own.
    expect(
      loadConfig({ TRON_TESTNET_NODE_URL: 'http://10.0.0.7:8090' }).testnetNode?.providers[0]?.grpc,
    ).toBeUndefined();
    expect(loadConfig({}).testnetNode).toBeUndefined();
  });

  it('reads TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT, which needs TRON_TESTNET_NODE_URL', () => {
    expect(loadConfig({}).ingest.testnetLightClientCheckpoint).toBeUndefined();
    expect(
      loadConfig({
        TRON_TESTNET_NODE_URL: 'https://nile.trongrid.io',
        TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT: 'nile-checkpoint.json',
      }).ingest.testnetLightClientCheckpoint,
    ).toBe('nile-checkpoint.json');
    expect(() => loadConfig({ TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT: 'cp.json' })).toThrow(
      /TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT: needs TRON_TESTNET_NODE_URL/,
    );
  });

  it('reads TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER as 0 or 1 only (off by default)', () => {
    expect(loadConfig({}).node.allowUnprovenSingleProvider).toBe(false);
    expect(
      loadConfig({ TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER: '1' }).node.allowUnprovenSingleProvider,
    ).toBe(true);
    for (const bad of ['yes', 'true', '2']) {
      expect(() => loadConfig({ TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER: bad }), bad).toThrow(
        ConfigError,
      );
    }
  });

  it('reads TRON_DELIVER_PROVIDER_PROOF as 0 or 1 (off by default); the test network never holds', () => {
    expect(loadConfig({}).node.deliverProviderProof).toBe(false);
    expect(loadConfig({ TRON_DELIVER_PROVIDER_PROOF: '1' }).node.deliverProviderProof).toBe(true);
    expect(
      loadConfig({ TRON_TESTNET_NODE_URL: 'https://nile.trongrid.io' }).testnetNode
        ?.deliverProviderProof,
    ).toBe(true);
    for (const bad of ['yes', 'true', '2']) {
      expect(() => loadConfig({ TRON_DELIVER_PROVIDER_PROOF: bad }), bad).toThrow(ConfigError);
    }
  });

  it('reads numbers only in plain decimal (no hex, exponent, padding or truncated fraction)', () => {
    // Value.Convert alone would read 0x1F90 as 8080 and 80.5 as 80.
    for (const bad of ['0x1F90', '8080.5', '8e3', ' 8080', '+8080']) {
      expect(() => loadConfig({ PORT: bad }), bad).toThrow(/PORT: must be a decimal integer/);
    }
    for (const bad of ['1e-4', '.5', '0x1', '-0.5', '0.5 ']) {
      expect(() => loadConfig({ DELIVERY_SCHEDULE_SCALE: bad }), bad).toThrow(
        /DELIVERY_SCHEDULE_SCALE: must be a decimal number/,
      );
    }
    expect(loadConfig({ PORT: '9090', DELIVERY_SCHEDULE_SCALE: '0.25' })).toMatchObject({
      http: { port: 9090 },
      delivery: { scheduleScale: 0.25 },
    });
  });

  it('reads the watch alert settings: defaults, values, and refuses out-of-range ones', () => {
    expect(loadConfig({}).alerts).toEqual({ failures: 5, paceMinutes: 5, autoPauseDays: 5 });
    expect(
      loadConfig({
        WATCH_ALERT_FAILURES: '12',
        WATCH_ALERT_PACE_MINUTES: '0.5',
        WATCH_AUTO_PAUSE_DAYS: '0',
      }).alerts,
    ).toEqual({ failures: 12, paceMinutes: 0.5, autoPauseDays: 0 });
    for (const [env, re] of [
      [{ WATCH_ALERT_FAILURES: '0' }, /WATCH_ALERT_FAILURES/],
      [{ WATCH_ALERT_FAILURES: '2.5' }, /WATCH_ALERT_FAILURES/],
      [{ WATCH_ALERT_PACE_MINUTES: '-1' }, /WATCH_ALERT_PACE_MINUTES/],
      [{ WATCH_AUTO_PAUSE_DAYS: '-1' }, /WATCH_AUTO_PAUSE_DAYS/],
      [{ WATCH_AUTO_PAUSE_DAYS: 'five' }, /WATCH_AUTO_PAUSE_DAYS/],
    ] as const) {
      expect(() => loadConfig(env), JSON.stringify(env)).toThrow(re);
    }
  });

  it('reads TRUST_PROXY as proxy addresses, CIDRs and named ranges, refusing what trusts anyone', () => {
    expect(
      loadConfig({
        TRUST_PROXY: ' 10.0.0.5, 10.1.0.0/16 ,2001:db8::/32,::1, uniquelocal, loopback ',
      }).http.trustProxy,
    ).toEqual(['10.0.0.5', '10.1.0.0/16', '2001:db8::/32', '::1', 'uniquelocal', 'loopback']);
    expect(loadConfig({ TRUST_PROXY: '' }).http.trustProxy).toEqual([]);
    for (const [bad, why] of [
      ['1', /hop count/],
      ['2', /hop count/],
      ['true', /not an IP address/],
      ['*', /not an IP address/],
      ['10.0.0.0/0', /trusts every address/],
      ['::/0', /trusts every address/],
      ['10.0.0.0/33', /prefix length \(1-32\)/],
      ['10.0.0.0/255.0.0.0', /prefix length/],
      ['2001:db8::/129', /prefix length \(1-128\)/],
      ['10.0.0.256', /not an IP address/],
      ['proxy.example.com', /not an IP address/],
    ] as const) {
      expect(() => loadConfig({ TRUST_PROXY: `10.0.0.1,${bad}` }), bad).toThrow(why);
    }
    // Every bad entry is listed, beside the other variables' problems.
    try {
      loadConfig({ TRUST_PROXY: '1,nope', PORT: 'x' });
      expect.unreachable();
    } catch (err) {
      const problems = (err as ConfigError).problems;
      expect(problems.filter((p) => p.startsWith('TRUST_PROXY:'))).toHaveLength(2);
      expect(problems.some((p) => p.startsWith('PORT:'))).toBe(true);
    }
  });

  it('serves metrics on their own listener, 127.0.0.1:9464 unless told', () => {
    expect(loadConfig({ METRICS_HOST: '10.0.0.7', METRICS_PORT: '0' }).metrics).toEqual({
      host: '10.0.0.7',
      port: 0,
    });
    for (const bad of ['-1', '65536', 'off', '9464.5']) {
      expect(() => loadConfig({ METRICS_PORT: bad }), bad).toThrow(/METRICS_PORT/);
    }
  });

  it('gives the console closed sign-up, a 7-day session and a localhost public URL by default', () => {
    expect(loadConfig({}).console).toEqual({
      signup: 'closed',
      sessionTtlSeconds: 604_800,
      publicUrl: 'http://localhost:8080',
    });
    expect(
      loadConfig({
        CONSOLE_SIGNUP: 'open',
        CONSOLE_SESSION_TTL_SECONDS: '60',
        PUBLIC_URL: 'https://tw.example.com',
        PORT: '9000',
      }).console,
    ).toEqual({ signup: 'open', sessionTtlSeconds: 60, publicUrl: 'https://tw.example.com' });
    // An origin only: a path, a query or another scheme would make broken invitation links.
    for (const bad of ['https://tw.example.com/', 'ftp://x', 'https://x/console', 'x.com']) {
      expect(() => loadConfig({ PUBLIC_URL: bad }), bad).toThrow(ConfigError);
    }
    expect(() => loadConfig({ CONSOLE_SIGNUP: 'maybe' })).toThrow(/CONSOLE_SIGNUP/);
  });

  it('prunes every 5 minutes: tokens 24 h after they end, attempt details after 30 days, events never unless told', () => {
    expect(loadConfig({}).retention).toEqual({
      intervalSeconds: 300,
      batchSize: 1_000,
      tokenHours: 24,
      attemptDetailDays: 30,
      eventDays: undefined,
    });
    expect(
      loadConfig({
        PRUNE_INTERVAL_SECONDS: '1',
        PRUNE_BATCH_SIZE: '50',
        TOKEN_RETENTION_HOURS: '0',
        ATTEMPT_DETAIL_RETENTION_DAYS: '7',
        EVENT_RETENTION_DAYS: '365',
      }).retention,
    ).toEqual({
      intervalSeconds: 1,
      batchSize: 50,
      tokenHours: 0,
      attemptDetailDays: 7,
      eventDays: 365,
    });
    for (const [name, bad] of [
      ['PRUNE_INTERVAL_SECONDS', '0'],
      ['PRUNE_BATCH_SIZE', '0'],
      ['TOKEN_RETENTION_HOURS', '-1'],
      ['ATTEMPT_DETAIL_RETENTION_DAYS', '0'],
      ['EVENT_RETENTION_DAYS', '0'],
      ['EVENT_RETENTION_DAYS', '1.5'],
    ] as const) {
      expect(() => loadConfig({ [name]: bad }), `${name}=${bad}`).toThrow(new RegExp(name));
    }
  });

  it('keeps audit log entries 365 days unless told, from 1 day to 100 years', () => {
    expect(loadConfig({}).audit).toEqual({ retentionDays: 365 });
    expect(loadConfig({ AUDIT_RETENTION_DAYS: '30' }).audit).toEqual({ retentionDays: 30 });
    for (const bad of ['0', '-1', '36501', '1.5', 'forever']) {
      expect(() => loadConfig({ AUDIT_RETENTION_DAYS: bad }), bad).toThrow(/AUDIT_RETENTION_DAYS/);
    }
  });

  it('turns e-mail on with SMTP_URL, sending from MAIL_FROM or no-reply at the public host', () => {
    expect(loadConfig({}).mail).toEqual({
      smtpUrl: undefined,
      from: 'tronwatch <no-reply@localhost>',
    });
    expect(
      loadConfig({
        SMTP_URL: 'smtps://u:p@mail.example.com:465',
        PUBLIC_URL: 'https://tw.example.com',
      }).mail,
    ).toEqual({
      smtpUrl: 'smtps://u:p@mail.example.com:465',
      from: 'tronwatch <no-reply@tw.example.com>',
    });
    expect(
      loadConfig({ SMTP_URL: 'smtp://127.0.0.1:2525', MAIL_FROM: 'Ops <ops@example.com>' }).mail,
    ).toEqual({ smtpUrl: 'smtp://127.0.0.1:2525', from: 'Ops <ops@example.com>' });
    // Only SMTP: another scheme is a mistake caught at start.
    for (const bad of ['http://mail.example.com', 'mail.example.com:25']) {
      expect(() => loadConfig({ SMTP_URL: bad }), bad).toThrow(/SMTP_URL/);
    }
  });

  it('coerces numbers and treats empty strings as unset', () => {
    const c = loadConfig({
      PORT: '9000',
      TRON_NODE_TIMEOUT_MS: '2500',
      DATABASE_URL: '',
      TRON_NODE_URL: 'http://127.0.0.1:1/',
      DATABASE_POOL_SIZE: '4',
    });
    expect(c.http.port).toBe(9000);
    expect(c.database.poolSize).toBe(4);
    expect(c.node.timeoutMs).toBe(2500);
    expect(c.database.url).toBeUndefined();
    expect(c.node.url).toBe('http://127.0.0.1:1');
  });

  it('lists every problem at once', () => {
    try {
      loadConfig({
        PORT: 'abc',
        TRON_NODE_TIMEOUT_MS: '5',
        LOG_LEVEL: 'loud',
        TRON_NODE_URL: 'ftp://x',
        DATABASE_POOL_SIZE: '0',
      });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      for (const v of [
        'PORT',
        'TRON_NODE_TIMEOUT_MS',
        'LOG_LEVEL',
        'TRON_NODE_URL',
        'DATABASE_POOL_SIZE',
      ])
        expect(problems).toContain(v);
    }
  });

  it('returns exactly the groups and fields of ConfigSchema, which the Config type is inferred from', () => {
    const every = loadConfig({
      DATABASE_URL: 'postgres://u@db/tw',
      REDIS_URL: 'redis://cache:6379',
      TRON_API_KEY: 'k',
      INGEST_START_BLOCK: '70000000',
      SECRET_ENCRYPTION_KEY: 'a'.repeat(64),
      SECRET_ENCRYPTION_KEYS_OLD: ' x , ,y ',
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32, 10.0.0.0/8',
      WEBHOOK_CA_FILE: '/ca.pem',
      METRICS_PORT: '9100',
      METRICS_HOST: '0.0.0.0',
      TRUST_PROXY: '10.0.0.0/8',
      EVENT_RETENTION_DAYS: '90',
    });
    expect(every.secrets.oldKeys).toEqual(['x', 'y']);
    expect(every.delivery.allowCidrs).toEqual(['127.0.0.1/32', '10.0.0.0/8']);
    for (const c of [loadConfig({}), every]) {
      // additionalProperties: false on every group, and unset variables are present as undefined.
      expect([...Value.Errors(ConfigSchema, c)]).toEqual([]);
      expect(Object.keys(c).sort()).toEqual(Object.keys(ConfigSchema.properties).sort());
      for (const [group, schema] of Object.entries(ConfigSchema.properties))
        if ('properties' in schema)
          expect(Object.keys(c[group as keyof typeof c] as object).sort()).toEqual(
            Object.keys(schema.properties).sort(),
          );
    }
  });

  it('gives a graceful stop 15 s, or the webhook timeout plus 5 s when that is longer', () => {
    expect(shutdownDeadlineMs(loadConfig({}))).toBe(15_000);
    expect(shutdownDeadlineMs(loadConfig({ WEBHOOK_TIMEOUT_MS: '30000' }))).toBe(35_000);
  });
});
