/**
 * A real SMTP server in the test process (smtp-server, the server half of nodemailer's project):
 * it takes every message on 127.0.0.1 at a free port, parses it (mailparser) and keeps it, so a
 * test sets `SMTP_URL` to `smtp.url` and reads what a user would find in their mailbox.
 * `failNext(n, code)` makes the next n messages fail with an SMTP reply (451: try again later;
 * 550: refused for good), to test the mailer's retries.
 */
import type { AddressInfo } from 'node:net';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  to: string[];
  from: string;
  subject: string;
  text: string;
  html: string;
  /** The first link to `/console/…` in the plain-text body. */
  link: string | undefined;
}

export interface TestSmtp {
  /** smtp://127.0.0.1:PORT */
  url: string;
  received: ReceivedMail[];
  /** Refuse the next `n` messages with `code` (default 451). */
  failNext(n: number, code?: number): void;
  /** Messages refused so far (failNext). */
  refused: number;
  /** The first message to `to` whose subject matches, waiting up to `timeoutMs`. */
  waitFor(to: string, subject?: RegExp, timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

function addresses(m: ParsedMail): string[] {
  const list = Array.isArray(m.to) ? m.to : m.to ? [m.to] : [];
  return list.flatMap((a) => a.value.map((v) => (v.address ?? '').toLowerCase()));
}

export async function startSmtp(): Promise<TestSmtp> {
  const received: ReceivedMail[] = [];
  let failing = 0;
  let failCode = 451;
  const state = { refused: 0 };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      simpleParser(stream)
        .then((m) => {
          if (failing > 0) {
            failing--;
            state.refused++;
            const err = new Error('test server: not now') as Error & { responseCode: number };
            err.responseCode = failCode;
            return callback(err);
          }
          const text = m.text ?? '';
          received.push({
            to: addresses(m),
            from: m.from?.text ?? '',
            subject: m.subject ?? '',
            text,
            html: typeof m.html === 'string' ? m.html : '',
            link: /https?:\/\/\S+\/console\/\S+/.exec(text)?.[0],
          });
          callback();
        })
        .catch(callback);
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    get refused() {
      return state.refused;
    },
    failNext(n, code = 451) {
      failing = n;
      failCode = code;
    },
    async waitFor(to, subject, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = received.find(
          (r) => r.to.includes(to.toLowerCase()) && (!subject || subject.test(r.subject)),
        );
        if (m) return m;
        if (Date.now() > deadline) throw new Error(`no mail to ${to} within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
