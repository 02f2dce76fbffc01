/**
 * Webhook secrets at rest (DESIGN invariant 6): AES-256-GCM with a 32-byte key from config, a
 * fresh 12-byte IV per secret, the key id stored beside the ciphertext so keys can rotate.
 * Stored bytes: iv (12) ‖ ciphertext ‖ tag (16). The plaintext is returned to the API caller
 * once, at creation, and otherwise only reaches the delivery worker's signer.
 *
 * Rotation (issue 5 item 4; `tronwatch secrets rotate-key`, src/secrets/rotate.ts): the keyring
 * holds the current key, which encrypts, and old keys, which only decrypt, until every row has
 * been re-encrypted. Old keys come from SECRET_ENCRYPTION_KEYS_OLD or, in the embedded mode, from
 * DATA_DIR/secret.key.old-<keyid> files ({@link rotateKeyFile} writes them).
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** Decryption failed: wrong key, unknown key id, or tampered ciphertext. */
export class SecretDecryptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretDecryptError';
  }
}

export interface EncryptedSecret {
  keyId: string;
  ciphertext: Buffer;
}

/** A keyring: one key encrypts, every known key decrypts (rotation keeps old ones for reading). */
export class SecretBox {
  private readonly keys = new Map<string, Buffer>();
  readonly currentKeyId: string;

  /** @param keys 32-byte keys; the first encrypts. @throws RangeError on a key of another size. */
  constructor(keys: Buffer[]) {
    if (keys.length === 0) throw new RangeError('at least one key is needed');
    for (const k of keys) {
      if (k.length !== 32) throw new RangeError('a secret encryption key must be 32 bytes');
      this.keys.set(keyId(k), k);
    }
    this.currentKeyId = keyId(keys[0] as Buffer);
  }

  encrypt(plaintext: string): EncryptedSecret {
    const key = this.keys.get(this.currentKeyId) as Buffer;
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', key, iv);
    const body = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
    return { keyId: this.currentKeyId, ciphertext: Buffer.concat([iv, body, c.getAuthTag()]) };
  }

  /** Every key id this keyring can decrypt, the current one first. */
  get keyIds(): string[] {
    return [this.currentKeyId, ...[...this.keys.keys()].filter((k) => k !== this.currentKeyId)];
  }

  /** True when `id` names a key of this keyring. */
  hasKey(id: string): boolean {
    return this.keys.has(id);
  }

  /**
   * Decrypt with whichever key `s.keyId` names and encrypt again under the current key (a fresh
   * IV). A secret already under the current key is re-sealed too; callers skip those.
   * @throws SecretDecryptError
   */
  reencrypt(s: EncryptedSecret): EncryptedSecret {
    return this.encrypt(this.decrypt(s));
  }

  /** @throws SecretDecryptError */
  decrypt(s: EncryptedSecret): string {
    const key = this.keys.get(s.keyId);
    if (!key) throw new SecretDecryptError(`unknown secret key id ${s.keyId}`);
    if (s.ciphertext.length < 12 + 16) throw new SecretDecryptError('ciphertext too short');
    const iv = s.ciphertext.subarray(0, 12);
    const tag = s.ciphertext.subarray(s.ciphertext.length - 16);
    const body = s.ciphertext.subarray(12, s.ciphertext.length - 16);
    try {
      const d = createDecipheriv('aes-256-gcm', key, iv);
      d.setAuthTag(tag);
      return Buffer.concat([d.update(body), d.final()]).toString('utf8');
    } catch {
      throw new SecretDecryptError('secret ciphertext failed authentication');
    }
  }
}

/** Key id: the first 16 hex digits of SHA-256(key); identifies a key without revealing it. */
export function keyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

/**
 * Parse a key given as 64 hex digits or base64 of 32 bytes.
 * @param name the setting named in the error (the message never contains the key).
 * @throws RangeError.
 */
export function parseKey(text: string, name = 'SECRET_ENCRYPTION_KEY'): Buffer {
  const t = text.trim();
  const k = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (k.length !== 32) throw new RangeError(`${name} must be 32 bytes (64 hex digits or base64)`);
  return k;
}

/**
 * Parse a comma-separated list of keys (SECRET_ENCRYPTION_KEYS_OLD); blanks are skipped.
 * @throws RangeError naming the position of a bad key (never the key).
 */
export function parseKeyList(
  keys: readonly string[] | string | undefined,
  name = 'SECRET_ENCRYPTION_KEYS_OLD',
): Buffer[] {
  const list = typeof keys === 'string' ? keys.split(',') : (keys ?? []);
  return list
    .map((k) => k.trim())
    .filter((k) => k !== '')
    .map((k, i) => parseKey(k, `${name} entry ${i + 1}`));
}

/** The embedded mode's key file: DATA_DIR/secret.key. */
export const KEY_FILE = 'secret.key';
const OLD_KEY_FILE_RE = /^secret\.key\.old-([0-9a-f]{16})$/;

/** DATA_DIR/secret.key.old-<keyid>: a retired key kept for reading until nothing references it. */
export function oldKeyFileName(id: string): string {
  return `${KEY_FILE}.old-${id}`;
}

/**
 * The embedded mode's key: DATA_DIR/secret.key, created (mode 0600) on first use.
 * Replicas sharing one PostgreSQL must share SECRET_ENCRYPTION_KEY instead.
 */
export function loadOrCreateKeyFile(dataDir: string): Buffer {
  const file = path.join(dataDir, 'secret.key');
  try {
    return parseKey(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  fs.mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  fs.writeFileSync(file, `${key.toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  return key;
}

/**
 * The retired keys of the embedded mode: every DATA_DIR/secret.key.old-<keyid> file, read-only.
 * A file whose content does not hash to its name is refused (a mix-up would hide a key).
 * @throws RangeError on a malformed or misnamed file.
 */
export function loadOldKeyFiles(dataDir: string): Buffer[] {
  let names: string[];
  try {
    names = fs.readdirSync(dataDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const keys: Buffer[] = [];
  for (const name of names.sort()) {
    const m = OLD_KEY_FILE_RE.exec(name);
    if (!m) continue;
    const key = parseKey(fs.readFileSync(path.join(dataDir, name), 'utf8'), name);
    if (keyId(key) !== m[1]) throw new RangeError(`${name}: the key in it has another key id`);
    keys.push(key);
  }
  return keys;
}

/** What {@link rotateKeyFile} did. */
export interface KeyFileRotation {
  /** Key id of the key that was current and is now kept as secret.key.old-<id>. */
  previousKeyId: string;
  /** Key id of the new DATA_DIR/secret.key. */
  currentKeyId: string;
  /** Path of the retired key's file. */
  oldFile: string;
}

/**
 * Embedded-mode rotation: keep the current DATA_DIR/secret.key as secret.key.old-<keyid>, then
 * put a fresh random key in its place (files mode 0600). Crash-safe in this order: the old key is
 * copied first, the new one is written beside and renamed over secret.key, so at every instant
 * secret.key holds a complete key and the old key exists on disk.
 * @throws Error when DATA_DIR/secret.key does not exist (nothing to rotate) or cannot be read.
 */
export function rotateKeyFile(dataDir: string): KeyFileRotation {
  const file = path.join(dataDir, KEY_FILE);
  const previous = parseKey(fs.readFileSync(file, 'utf8'), file);
  const previousKeyId = keyId(previous);
  const oldFile = path.join(dataDir, oldKeyFileName(previousKeyId));
  if (!fs.existsSync(oldFile)) {
    const tmpOld = `${oldFile}.tmp-${process.pid}`;
    fs.writeFileSync(tmpOld, `${previous.toString('hex')}\n`, { mode: 0o600 });
    fs.renameSync(tmpOld, oldFile);
  }
  const next = randomBytes(32);
  const tmpNew = `${file}.new-${process.pid}`;
  fs.writeFileSync(tmpNew, `${next.toString('hex')}\n`, { mode: 0o600 });
  fs.renameSync(tmpNew, file);
  return { previousKeyId, currentKeyId: keyId(next), oldFile };
}

/**
 * A new webhook secret: `whsec_` + standard base64 of 32 random bytes (256 bits).
 * X-Signature (SPEC) is keyed by the WHOLE string as shown, `whsec_` included. The `whsec_<base64>`
 * form is also what Standard Webhooks libraries accept, for a scheme that keys with the decoded
 * bytes and signs `id.timestamp.body` (src/delivery/standard-webhooks.ts).
 */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}
