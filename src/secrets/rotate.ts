/**
 * `tronwatch secrets rotate-key` (issue 5 item 4; DESIGN invariant 6): re-encrypt every webhook
 * secret that is not under the current key, so retired keys can be deleted.
 *
 * Keys. The keyring is the service's (src/service.ts secretBox): SECRET_ENCRYPTION_KEY encrypts,
 * SECRET_ENCRYPTION_KEYS_OLD (comma-separated) only decrypt. In the embedded mode (no
 * SECRET_ENCRYPTION_KEY) the command first rotates the key file: DATA_DIR/secret.key is kept as
 * DATA_DIR/secret.key.old-<keyid> and a fresh key takes its place (rotateKeyFile); `--no-new-key`
 * skips that and only finishes a re-encryption.
 *
 * Procedure with PostgreSQL and several replicas: (1) give every replica the new key as an extra
 * read key (SECRET_ENCRYPTION_KEYS_OLD=new), (2) make it current everywhere
 * (SECRET_ENCRYPTION_KEY=new, SECRET_ENCRYPTION_KEYS_OLD=old), (3) run `tronwatch secrets
 * rotate-key` with that same configuration, (4) remove the old key ids it reports as no longer
 * referenced. Step 1 lets a replica still on the old configuration read secrets that an updated
 * one already wrote under the new key. The embedded database belongs to one process: stop the
 * service, rotate, start it again.
 *
 * Safe while the service runs, and idempotent: rows are walked in id order, in batches, each batch
 * in its own transaction, and each row is updated only if it still holds exactly the ciphertext
 * that was read (`UPDATE … WHERE id = $1 AND secret_key_id = $old AND secret_ciphertext = $ct`),
 * so a concurrent writer is never overwritten and a second run finds nothing left to do. A worker
 * that read the old ciphertext just before still decrypts it: the old key stays in its keyring.
 * Deleted watches are re-encrypted too (their pending notifications are still delivered), and so
 * are the secrets a rotation replaced that still sign during their grace period (migration 040).
 *
 * Output names key ids only (SHA-256 prefixes of the keys), never a key or a secret.
 */
import { CLI_ACTOR, recordAudit } from '../audit/audit.js';
import { type EncryptedSecret, rotateKeyFile, type SecretBox } from '../common/secrets.js';
import type { Db } from '../db/pool.js';

/** Rows read and re-encrypted per transaction. */
export const DEFAULT_BATCH_SIZE = 500;

/** Rows per old key id that could not be re-encrypted, with the reason. */
export interface RotationFailure {
  key_id: string;
  count: number;
  reason: 'unknown_key_id' | 'decrypt_failed';
}

export interface ReencryptResult {
  /** Key id of the key every secret is now under. */
  current_key_id: string;
  /** Rows re-encrypted by this run. */
  reencrypted: number;
  /** Rows that could not be re-encrypted (their key is not in the keyring, or does not open them). */
  failures: RotationFailure[];
  /** Secrets per key id after the run (the current key included). */
  referenced: Record<string, number>;
  /** Old key ids of the keyring that no secret references any more: safe to remove. */
  unreferenced_old_key_ids: string[];
  /** Old key ids that some secret still references: keep them. */
  still_referenced_old_key_ids: string[];
}

interface SecretRow {
  id: string;
  secret_key_id: string;
  secret_ciphertext: Uint8Array;
}

/** Every (table, key id column, ciphertext column) sealed with the keyring (doctor reads it too). */
export const SEALED_COLUMNS = [
  ['watches', 'secret_key_id', 'secret_ciphertext'],
  ['watches', 'previous_secret_key_id', 'previous_secret_ciphertext'],
  // Endpoints' secrets (migration 070; issue 30), current and replaced.
  ['endpoints', 'secret_key_id', 'secret_ciphertext'],
  ['endpoints', 'previous_secret_key_id', 'previous_secret_ciphertext'],
  ['console_users', 'totp_key_id', 'totp_ciphertext'],
  // The signed alert webhooks' own secrets (migration 056; issue 29 item 1).
  ['alert_channels', 'secret_key_id', 'secret_ciphertext'],
] as const;

const asBuffer = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/**
 * Re-encrypt, under `box.currentKeyId`, every secret stored under another key: webhook secrets
 * (current and previous), console users' TOTP secrets and the alert webhooks' secrets.
 * @param opts.batchSize rows per transaction (default {@link DEFAULT_BATCH_SIZE}).
 * @param opts.onBatch called after each committed batch with the running total.
 */
export async function reencryptSecrets(
  db: Db,
  box: SecretBox,
  opts: { batchSize?: number; onBatch?: (reencrypted: number) => void } = {},
): Promise<ReencryptResult> {
  const batchSize = opts.batchSize ?? DEFAULT_BATCH_SIZE;
  if (!Number.isSafeInteger(batchSize) || batchSize < 1)
    throw new RangeError('batch size must be a positive integer');
  const current = box.currentKeyId;
  const failed = new Map<string, RotationFailure>();
  const fail = (kid: string, reason: RotationFailure['reason']) => {
    const k = `${kid}|${reason}`;
    const f = failed.get(k) ?? { key_id: kid, count: 0, reason };
    f.count++;
    failed.set(k, f);
  };
  let reencrypted = 0;
  // The current secrets, then the secrets a rotation replaced that still sign during their grace
  // period (migration 040; issue 19 item 3), then the console users' TOTP secrets (migration 046;
  // issue 18 item 4): all are under the keyring's keys.
  for (const [table, kid, ct] of SEALED_COLUMNS) {
    let after = '';
    for (;;) {
      const done = await db.transaction(async (tx) => {
        const { rows } = await tx.query<SecretRow>(
          `SELECT id, ${kid} AS secret_key_id, ${ct} AS secret_ciphertext FROM ${table}
            WHERE ${ct} IS NOT NULL AND ${kid} IS NOT NULL
              AND ${kid} <> $1 AND id > $2
            ORDER BY id LIMIT $3`,
          [current, after, batchSize],
        );
        for (const r of rows) {
          after = r.id;
          const old: EncryptedSecret = {
            keyId: r.secret_key_id,
            ciphertext: asBuffer(r.secret_ciphertext),
          };
          if (!box.hasKey(old.keyId)) {
            fail(old.keyId, 'unknown_key_id');
            continue;
          }
          let sealed: EncryptedSecret;
          try {
            sealed = box.reencrypt(old);
          } catch {
            fail(old.keyId, 'decrypt_failed');
            continue;
          }
          const u = await tx.query(
            `UPDATE ${table} SET ${kid} = $2, ${ct} = $3
              WHERE id = $1 AND ${kid} = $4 AND ${ct} = $5`,
            [r.id, sealed.keyId, sealed.ciphertext, old.keyId, old.ciphertext],
          );
          reencrypted += u.rowCount;
        }
        return rows.length < batchSize;
      });
      opts.onBatch?.(reencrypted);
      if (done) break;
    }
  }
  const { rows } = await db.query<{ secret_key_id: string; n: number }>(
    `SELECT k AS secret_key_id, count(*)::int AS n
       FROM (${SEALED_COLUMNS.map(
         ([table, kid, ct]) =>
           `SELECT ${kid} AS k FROM ${table} WHERE ${ct} IS NOT NULL AND ${kid} IS NOT NULL`,
       ).join(' UNION ALL ')}) AS s
      GROUP BY k ORDER BY k`,
  );
  const referenced: Record<string, number> = {};
  for (const r of rows) referenced[r.secret_key_id] = Number(r.n);
  const oldIds = box.keyIds.filter((k) => k !== current);
  return {
    current_key_id: current,
    reencrypted,
    failures: [...failed.values()],
    referenced,
    unreferenced_old_key_ids: oldIds.filter((k) => !(k in referenced)),
    still_referenced_old_key_ids: oldIds.filter((k) => k in referenced),
  };
}

export interface RotateKeyResult extends ReencryptResult {
  /** Embedded mode: the key file was rotated by this run. */
  key_file_rotated: boolean;
  /** Embedded mode: where the previous key is kept (remove it once unreferenced). */
  previous_key_file?: string;
  /** What the operator should do next, one line. */
  note: string;
}

export interface RotateKeyOptions {
  /** The keyring builder (src/service.ts secretBox bound to the config). */
  keyring: () => SecretBox;
  /** Embedded mode (no SECRET_ENCRYPTION_KEY): DATA_DIR, whose key file is rotated. */
  keyFileDir?: string | undefined;
  /** Embedded mode: generate a new key file first (default true; false finishes a rotation). */
  newKey?: boolean;
  batchSize?: number;
  onBatch?: (reencrypted: number) => void;
}

/**
 * The command: rotate the key file (embedded mode, unless `newKey` is false), build the keyring,
 * re-encrypt, report. With SECRET_ENCRYPTION_KEY set, the operator has already made the new key
 * current and listed the old ones in SECRET_ENCRYPTION_KEYS_OLD; nothing is generated.
 */
export async function rotateKey(db: Db, opts: RotateKeyOptions): Promise<RotateKeyResult> {
  let rotated: ReturnType<typeof rotateKeyFile> | undefined;
  if (opts.keyFileDir !== undefined && (opts.newKey ?? true)) {
    // Build the keyring once first: it creates DATA_DIR/secret.key when there is none yet.
    opts.keyring();
    rotated = rotateKeyFile(opts.keyFileDir);
  }
  const box = opts.keyring();
  if (rotated && rotated.currentKeyId !== box.currentKeyId) {
    throw new Error('the rotated key file is not the keyring current key');
  }
  const r = await reencryptSecrets(db, box, {
    ...(opts.batchSize !== undefined ? { batchSize: opts.batchSize } : {}),
    ...(opts.onBatch ? { onBatch: opts.onBatch } : {}),
  });
  const remove =
    r.unreferenced_old_key_ids.length === 0
      ? 'no old key can be removed yet'
      : opts.keyFileDir !== undefined
        ? `DATA_DIR/secret.key.old-<id> files of ${r.unreferenced_old_key_ids.join(', ')} may be deleted`
        : `keys with ids ${r.unreferenced_old_key_ids.join(', ')} may be removed from SECRET_ENCRYPTION_KEYS_OLD`;
  // One deployment-wide entry (no account): key ids only, never a key.
  await recordAudit(
    db,
    { accountId: null, actor: CLI_ACTOR, clientIp: null },
    {
      action: 'secrets.rotated',
      detail: {
        current_key_id: r.current_key_id,
        reencrypted: r.reencrypted,
        failed: r.failures.reduce((s, f) => s + f.count, 0),
        key_file_rotated: rotated !== undefined,
      },
    },
  );
  const failing = r.failures.length
    ? `; ${r.failures.reduce((s, f) => s + f.count, 0)} secrets could not be re-encrypted: add their keys to the keyring and run again`
    : '';
  return {
    ...r,
    key_file_rotated: rotated !== undefined,
    ...(rotated ? { previous_key_file: rotated.oldFile } : {}),
    note: `${remove}${failing}`,
  };
}
