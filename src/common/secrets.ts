/**
 * Webhook secrets at rest (DESIGN invariant 6): AES-256-GCM with a 32-byte key from config, a
 * fresh 12-byte IV per secret, the key id stored beside the ciphertext so keys can rotate.
 * Stored bytes: iv (12) ‖ ciphertext ‖ tag (16). The plaintext is returned to the API caller
 * once, at creation, and otherwise only reaches the delivery worker's signer.
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

/** Parse a key given as 64 hex digits or base64 of 32 bytes. @throws RangeError. */
export function parseKey(text: string): Buffer {
  const t = text.trim();
  const k = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (k.length !== 32)
    throw new RangeError('SECRET_ENCRYPTION_KEY must be 32 bytes (64 hex digits or base64)');
  return k;
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
 * A new webhook secret: `whsec_` + standard base64 of 32 random bytes (256 bits).
 * X-Signature (SPEC) is keyed by the WHOLE string as shown, `whsec_` included. The `whsec_<base64>`
 * form is also what Standard Webhooks libraries accept, for a scheme that keys with the decoded
 * bytes and signs `id.timestamp.body`; that scheme is not sent yet.
 */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}
