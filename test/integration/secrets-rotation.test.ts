/**
 * Secrets at rest, rotation (issue 5 item 4; DESIGN invariant 6): the keyring (current key
 * encrypts, old keys only decrypt), SECRET_ENCRYPTION_KEYS_OLD, the embedded key files, and
 * `tronwatch secrets rotate-key` (re-encryption in batches, idempotent, safe beside concurrent
 * writers and a second concurrent run), on both engines and through the real CLI.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import {
  type EncryptedSecret,
  KEY_FILE,
  keyId,
  loadOldKeyFiles,
  newWebhookSecret,
  oldKeyFileName,
  parseKeyList,
  rotateKeyFile,
  SecretBox,
  SecretDecryptError,
} from '../../src/common/secrets.js';
import { loadConfig } from '../../src/config.js';
import type { Db } from '../../src/db/pool.js';
import { reencryptSecrets, rotateKey } from '../../src/secrets/rotate.js';
import { secretBox } from '../../src/service.js';
import { runCli } from '../helpers/cli.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';

const hex = (k: Buffer) => k.toString('hex');
const tmpDirs: string[] = [];
function tmpDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-rotate-'));
  tmpDirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of tmpDirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe('SecretBox keyring', () => {
  it('encrypts with the first key, decrypts with any, re-encrypts under the current one', () => {
    const [a, b] = [randomBytes(32), randomBytes(32)];
    const old = new SecretBox([a]);
    const sealed = old.encrypt('whsec_x');
    const ring = new SecretBox([b, a]);
    expect(ring.currentKeyId).toBe(keyId(b));
    expect(ring.keyIds).toEqual([keyId(b), keyId(a)]);
    expect(ring.hasKey(keyId(a))).toBe(true);
    expect(ring.decrypt(sealed)).toBe('whsec_x');
    const again = ring.reencrypt(sealed);
    expect(again.keyId).toBe(keyId(b));
    expect(ring.decrypt(again)).toBe('whsec_x');
    expect(() => old.decrypt(again)).toThrow(SecretDecryptError);
    // The same key given twice is one key.
    expect(new SecretBox([b, a, b]).keyIds).toEqual([keyId(b), keyId(a)]);
  });

  it('parses SECRET_ENCRYPTION_KEYS_OLD (hex or base64, commas, blanks) without echoing keys', () => {
    const [a, b] = [randomBytes(32), randomBytes(32)];
    const keys = parseKeyList(` ${hex(a)} ,, ${b.toString('base64')} `);
    expect(keys.map(keyId)).toEqual([keyId(a), keyId(b)]);
    expect(parseKeyList(undefined)).toEqual([]);
    const bad = `${hex(a)},deadbeef${hex(b).slice(8)}0000`;
    expect(() => parseKeyList(bad)).toThrow(/SECRET_ENCRYPTION_KEYS_OLD entry 2 must be 32 bytes/);
    try {
      parseKeyList(bad);
    } catch (err) {
      expect((err as Error).message).not.toContain(hex(a).slice(0, 16));
    }
  });

  it('config + secretBox(): SECRET_ENCRYPTION_KEY encrypts, SECRET_ENCRYPTION_KEYS_OLD decrypt', () => {
    const [cur, o1, o2] = [randomBytes(32), randomBytes(32), randomBytes(32)];
    const cfg = loadConfig({
      SECRET_ENCRYPTION_KEY: hex(cur),
      SECRET_ENCRYPTION_KEYS_OLD: `${hex(o1)},${o2.toString('base64')}`,
      DATA_DIR: tmpDir(),
    });
    expect(cfg.secrets.oldKeys).toHaveLength(2);
    const box = secretBox(cfg, silentLogger);
    expect(box.keyIds).toEqual([keyId(cur), keyId(o1), keyId(o2)]);
    expect(box.decrypt(new SecretBox([o2]).encrypt('s'))).toBe('s');
    expect(loadConfig({}).secrets.oldKeys).toEqual([]);
  });

  it('embedded mode: rotateKeyFile keeps the old key as secret.key.old-<id>; secretBox reads it', () => {
    const dir = tmpDir();
    const cfg = loadConfig({ DATA_DIR: dir });
    const first = secretBox(cfg, silentLogger); // creates DATA_DIR/secret.key
    const sealed = first.encrypt('whsec_old');
    const r = rotateKeyFile(cfg.dataDir);
    expect(r.previousKeyId).toBe(first.currentKeyId);
    expect(r.currentKeyId).not.toBe(first.currentKeyId);
    expect(path.basename(r.oldFile)).toBe(oldKeyFileName(first.currentKeyId));
    expect(fs.statSync(r.oldFile).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.join(cfg.dataDir, KEY_FILE)).mode & 0o777).toBe(0o600);
    const second = secretBox(cfg, silentLogger);
    expect(second.currentKeyId).toBe(r.currentKeyId);
    expect(second.keyIds).toEqual([r.currentKeyId, r.previousKeyId]);
    expect(second.decrypt(sealed)).toBe('whsec_old');
    expect(
      fs.readdirSync(cfg.dataDir).filter((f) => f.includes('.tmp-') || f.includes('.new-')),
    ).toEqual([]);
    // A misnamed old key file is refused rather than silently hiding a key.
    fs.writeFileSync(
      path.join(cfg.dataDir, oldKeyFileName('0123456789abcdef')),
      hex(randomBytes(32)),
    );
    expect(() => loadOldKeyFiles(cfg.dataDir)).toThrow(/another key id/);
  });
});

/** Insert an account and `n` webhook watches whose secrets are sealed by `box`. */
async function seedWatches(
  db: Db,
  box: SecretBox,
  n: number,
  tag: string,
  opts: { deleted?: boolean } = {},
): Promise<Map<string, string>> {
  const acc = `acc_${tag}`;
  await db.query(
    `INSERT INTO accounts (id, email, plan) VALUES ($1, $2, 'scale') ON CONFLICT (id) DO NOTHING`,
    [acc, `${tag}@example.com`],
  );
  const plain = new Map<string, string>();
  for (let i = 0; i < n; i++) {
    const id = `wh_${tag}_${String(i).padStart(4, '0')}`;
    const secret = newWebhookSecret();
    const sealed = box.encrypt(secret);
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, webhook_url, secret_key_id, secret_ciphertext,
                            active_from_block, deleted_at)
       VALUES ($1, $2, 'mainnet', $3, $3, 'ALL', 'both', 'webhook', 'https://hooks.example.com/x',
               $4, $5, 1, $6)`,
      [
        id,
        acc,
        `41${randomBytes(20).toString('hex')}`,
        sealed.keyId,
        sealed.ciphertext,
        opts.deleted ? new Date() : null,
      ],
    );
    plain.set(id, secret);
  }
  return plain;
}

async function storedSecrets(db: Db): Promise<Map<string, EncryptedSecret>> {
  const { rows } = await db.query<{
    id: string;
    secret_key_id: string;
    secret_ciphertext: Uint8Array;
  }>(
    'SELECT id, secret_key_id, secret_ciphertext FROM watches WHERE secret_ciphertext IS NOT NULL',
  );
  return new Map(
    rows.map((r) => [
      r.id,
      { keyId: r.secret_key_id, ciphertext: Buffer.from(r.secret_ciphertext) },
    ]),
  );
}

describe.each(dbEngines)('rotate-key re-encryption on %s', (engine) => {
  let t: TestDb | undefined;
  afterEach(async () => {
    await t?.drop();
    t = undefined;
  });

  it('re-encrypts every secret not under the current key, in batches; idempotent', async () => {
    t = await migratedDb(engine);
    const [kA, kB, kC] = [randomBytes(32), randomBytes(32), randomBytes(32)];
    const plain = new Map([
      ...(await seedWatches(t.db, new SecretBox([kA]), 7, 'a')),
      ...(await seedWatches(t.db, new SecretBox([kB]), 4, 'b', { deleted: true })),
      ...(await seedWatches(t.db, new SecretBox([kC]), 3, 'c')),
    ]);
    const untouched = await storedSecrets(t.db);
    const ring = new SecretBox([kC, kA, kB]);
    const batches: number[] = [];
    const r = await reencryptSecrets(t.db, ring, { batchSize: 3, onBatch: (n) => batches.push(n) });
    expect(r.reencrypted).toBe(11);
    expect(batches.length).toBeGreaterThanOrEqual(4); // 11 rows, 3 per batch
    expect(r.failures).toEqual([]);
    expect(r.current_key_id).toBe(keyId(kC));
    expect(r.referenced).toEqual({ [keyId(kC)]: 14 });
    expect(r.unreferenced_old_key_ids.sort()).toEqual([keyId(kA), keyId(kB)].sort());
    expect(r.still_referenced_old_key_ids).toEqual([]);
    const now = await storedSecrets(t.db);
    for (const [id, secret] of plain) {
      const s = now.get(id);
      if (!s) throw new Error(`missing ${id}`);
      expect(s.keyId).toBe(keyId(kC));
      expect(new SecretBox([kC]).decrypt(s)).toBe(secret);
    }
    // Rows already under the current key were not rewritten.
    for (const id of ['wh_c_0000', 'wh_c_0001', 'wh_c_0002']) {
      expect(now.get(id)?.ciphertext.equals(untouched.get(id)?.ciphertext ?? Buffer.alloc(0))).toBe(
        true,
      );
    }
    const again = await reencryptSecrets(t.db, ring, { batchSize: 3 });
    expect(again.reencrypted).toBe(0);
    expect(again.unreferenced_old_key_ids.sort()).toEqual([keyId(kA), keyId(kB)].sort());
  });

  it('reports secrets under an unknown key, keeps going, and keeps their key referenced', async () => {
    t = await migratedDb(engine);
    const [kA, kLost, kC] = [randomBytes(32), randomBytes(32), randomBytes(32)];
    await seedWatches(t.db, new SecretBox([kA]), 3, 'a');
    await seedWatches(t.db, new SecretBox([kLost]), 2, 'l');
    // A row whose ciphertext the named key does not open (tampered).
    await seedWatches(t.db, new SecretBox([kA]), 1, 't');
    await t.db.query(
      `UPDATE watches SET secret_ciphertext = decode(repeat('00', 60), 'hex') WHERE id = 'wh_t_0000'`,
    );
    const r = await reencryptSecrets(t.db, new SecretBox([kC, kA]), { batchSize: 2 });
    expect(r.reencrypted).toBe(3);
    expect(r.failures.sort((x, y) => x.reason.localeCompare(y.reason))).toEqual([
      { key_id: keyId(kA), count: 1, reason: 'decrypt_failed' },
      { key_id: keyId(kLost), count: 2, reason: 'unknown_key_id' },
    ]);
    expect(r.referenced).toEqual({ [keyId(kC)]: 3, [keyId(kLost)]: 2, [keyId(kA)]: 1 });
    expect(r.still_referenced_old_key_ids).toEqual([keyId(kA)]);
    expect(r.unreferenced_old_key_ids).toEqual([]);
  });

  it('re-encrypts the replaced secrets of running grace periods too (issue 19 item 3)', async () => {
    t = await migratedDb(engine);
    const [kA, kC] = [randomBytes(32), randomBytes(32)];
    const boxA = new SecretBox([kA]);
    await seedWatches(t.db, boxA, 2, 'g');
    const previous = newWebhookSecret();
    const sealed = boxA.encrypt(previous);
    await t.db.query(
      `UPDATE watches SET previous_secret_key_id = $1, previous_secret_ciphertext = $2,
              previous_secret_expires_at = now() + interval '1 day' WHERE id = 'wh_g_0000'`,
      [sealed.keyId, sealed.ciphertext],
    );
    const before = await reencryptSecrets(t.db, new SecretBox([kA]), { batchSize: 5 });
    expect(before.referenced).toEqual({ [keyId(kA)]: 3 });
    const r = await reencryptSecrets(t.db, new SecretBox([kC, kA]), { batchSize: 5 });
    expect(r.reencrypted).toBe(3);
    expect(r.referenced).toEqual({ [keyId(kC)]: 3 });
    expect(r.unreferenced_old_key_ids).toEqual([keyId(kA)]);
    const { rows } = await t.db.query<{ k: string; c: Uint8Array }>(
      `SELECT previous_secret_key_id AS k, previous_secret_ciphertext AS c FROM watches
        WHERE id = 'wh_g_0000'`,
    );
    const row = rows[0] as { k: string; c: Uint8Array };
    expect(row.k).toBe(keyId(kC));
    expect(new SecretBox([kC]).decrypt({ keyId: row.k, ciphertext: Buffer.from(row.c) })).toBe(
      previous,
    );
  });

  it('is safe beside a second concurrent run and concurrent writers', async () => {
    t = await migratedDb(engine);
    const [kA, kC] = [randomBytes(32), randomBytes(32)];
    const plain = await seedWatches(t.db, new SecretBox([kA]), 60, 'a');
    const ring = new SecretBox([kC, kA]);
    const db = t.db;
    // While two rotations run, the service (already on the new config) keeps creating watches.
    const [r1, r2, fresh] = await Promise.all([
      reencryptSecrets(db, ring, { batchSize: 7 }),
      reencryptSecrets(db, ring, { batchSize: 5 }),
      seedWatches(db, ring, 10, 'n'),
    ]);
    // Every row was re-encrypted exactly once between the two runs (the conditional UPDATE).
    expect(r1.reencrypted + r2.reencrypted).toBe(60);
    const now = await storedSecrets(db);
    for (const [id, secret] of [...plain, ...fresh]) {
      const s = now.get(id);
      if (!s) throw new Error(`missing ${id}`);
      expect(s.keyId).toBe(keyId(kC));
      expect(ring.decrypt(s)).toBe(secret);
    }
  });
});

describe('rotateKey, embedded mode (key files)', () => {
  it('rotates the key file, re-encrypts, lists the old key as unreferenced; --no-new-key resumes', {
    timeout: 120_000,
  }, async () => {
    const t = await migratedDb('pglite');
    try {
      const dir = tmpDir();
      const cfg = loadConfig({ DATA_DIR: dir });
      const keyring = () => secretBox(cfg, silentLogger);
      const first = keyring();
      const plain = await seedWatches(t.db, first, 5, 'e');
      const r = await rotateKey(t.db, { keyring, keyFileDir: cfg.dataDir, batchSize: 2 });
      expect(r.key_file_rotated).toBe(true);
      expect(r.reencrypted).toBe(5);
      expect(r.current_key_id).not.toBe(first.currentKeyId);
      expect(r.unreferenced_old_key_ids).toEqual([first.currentKeyId]);
      expect(r.previous_key_file).toBe(path.join(dir, oldKeyFileName(first.currentKeyId)));
      expect(r.note).toContain(first.currentKeyId);
      const box = keyring();
      for (const [id, s] of await storedSecrets(t.db)) expect(box.decrypt(s)).toBe(plain.get(id));
      const resumed = await rotateKey(t.db, { keyring, keyFileDir: cfg.dataDir, newKey: false });
      expect(resumed.key_file_rotated).toBe(false);
      expect(resumed.reencrypted).toBe(0);
      expect(resumed.current_key_id).toBe(r.current_key_id);
      // Once the old file is removed, the service still starts and reads everything.
      fs.rmSync(path.join(dir, oldKeyFileName(first.currentKeyId)));
      const after = keyring();
      for (const [id, s] of await storedSecrets(t.db)) expect(after.decrypt(s)).toBe(plain.get(id));
    } finally {
      await t.drop();
    }
  });
});

describe('tronwatch secrets rotate-key (the CLI)', () => {
  it('embedded mode: generates a new key file and prints what it did', {
    timeout: 180_000,
  }, async () => {
    const dir = tmpDir();
    const env = { DATA_DIR: dir, DATABASE_URL: '' };
    const first = await runCli(['secrets', 'rotate-key'], env);
    expect(first.code, first.stderr).toBe(0);
    const out = JSON.parse(first.stdout) as Record<string, unknown>;
    expect(out.key_file_rotated).toBe(true);
    expect(out.reencrypted).toBe(0);
    const oldId = String(path.basename(String(out.previous_key_file))).replace(
      /^secret\.key\.old-/,
      '',
    );
    expect(out.unreferenced_old_key_ids).toEqual([oldId]);
    expect(fs.existsSync(path.join(dir, 'secret.key'))).toBe(true);
    const resumed = await runCli(['secrets', 'rotate-key', '--no-new-key'], env);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({
      key_file_rotated: false,
      current_key_id: out.current_key_id,
    });
    const keyText = fs.readFileSync(path.join(dir, 'secret.key'), 'utf8').trim();
    expect(first.stdout + first.stderr + resumed.stdout + resumed.stderr).not.toContain(keyText);
  });

  it.runIf(dbEngines.includes('postgres'))(
    'PostgreSQL: SECRET_ENCRYPTION_KEY + SECRET_ENCRYPTION_KEYS_OLD, exit 1 on an unknown key',
    { timeout: 180_000 },
    async () => {
      const t = await migratedDb('postgres');
      try {
        const [kA, kB, kC] = [randomBytes(32), randomBytes(32), randomBytes(32)];
        await seedWatches(t.db, new SecretBox([kA]), 4, 'a');
        const env = {
          DATABASE_URL: t.url ?? '',
          DATA_DIR: tmpDir(),
          SECRET_ENCRYPTION_KEY: hex(kC),
          SECRET_ENCRYPTION_KEYS_OLD: `${hex(kA)},${kB.toString('base64')}`,
        };
        const run = await runCli(['secrets', 'rotate-key', '--batch-size', '3'], env);
        expect(run.code, run.stderr).toBe(0);
        const out = JSON.parse(run.stdout) as Record<string, unknown>;
        expect(out).toMatchObject({ reencrypted: 4, key_file_rotated: false, failures: [] });
        expect((out.unreferenced_old_key_ids as string[]).sort()).toEqual(
          [keyId(kA), keyId(kB)].sort(),
        );
        for (const k of [kA, kB, kC]) {
          expect(run.stdout + run.stderr).not.toContain(hex(k).slice(0, 16));
          expect(run.stdout + run.stderr).not.toContain(k.toString('base64').slice(0, 16));
        }
        // A secret under a key the keyring lacks: reported, exit code 1.
        await seedWatches(t.db, new SecretBox([randomBytes(32)]), 1, 'x');
        const lost = await runCli(['secrets', 'rotate-key'], env);
        expect(lost.code).toBe(1);
        expect(JSON.parse(lost.stdout)).toMatchObject({
          reencrypted: 0,
          failures: [{ count: 1, reason: 'unknown_key_id' }],
        });
      } finally {
        await t.drop();
      }
    },
  );
});
