/**
 * A local mailbox for `tronwatch dev` (issue 29 item 5): an SMTP server on 127.0.0.1 (smtp-server,
 * the server half of nodemailer's project) that accepts every message, parses it (mailparser),
 * keeps it in memory and writes its raw bytes to `dir/<n>.eml`, and a small HTTP page that lists
 * the messages, newest first, with their plain-text bodies and links (invitations, password
 * resets, alerts). The service sends to it as to any SMTP server (SMTP_URL), so what a newcomer
 * sees here is exactly what a real mailbox would get.
 *
 * Pages (plain HTTP on 127.0.0.1, a free port):
 * - `GET /` — the messages as HTML (every value escaped; links in bodies made clickable);
 * - `GET /messages.json` — `[{ id, received_at, from, to, subject, text }]`, newest first;
 * - `GET /<id>.eml` — one message's raw bytes (message/rfc822).
 *
 * Not a production server: no authentication, no size limit beyond smtp-server's defaults,
 * everything kept until the process ends. smtp-server and mailparser are development
 * dependencies: this module is imported only by `tronwatch dev` (main.ts imports it lazily).
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** One captured message. */
export interface CapturedMail {
  /** 1, 2, 3… in arrival order. */
  id: number;
  receivedAt: Date;
  from: string;
  to: string[];
  subject: string;
  /** The plain-text body. */
  text: string;
}

export interface Mailbox {
  /** `smtp://127.0.0.1:PORT`: the service's SMTP_URL. */
  smtpUrl: string;
  /** `http://127.0.0.1:PORT/`: the page listing the messages. */
  url: string;
  /** The folder holding `<id>.eml` files. */
  dir: string;
  /** Messages received so far, in arrival order. */
  messages: CapturedMail[];
  /** Link the page to the console (known once the service listens). */
  setConsoleUrl(url: string): void;
  close(): Promise<void>;
}

function recipients(m: ParsedMail): string[] {
  const list = Array.isArray(m.to) ? m.to : m.to ? [m.to] : [];
  return list.flatMap((a) => a.value.map((v) => v.address ?? '')).filter((a) => a !== '');
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The body as HTML: escaped, its http(s) links made clickable. */
function bodyHtml(text: string): string {
  return escapeHtml(text).replace(
    /https?:\/\/[^\s<>"']+/g,
    (u) => `<a href="${u}" target="_blank" rel="noopener">${u}</a>`,
  );
}

function page(messages: readonly CapturedMail[], consoleUrl: string | undefined): string {
  const items = [...messages]
    .reverse()
    .map(
      (m) => `<article>
  <h2>${escapeHtml(m.subject || '(no subject)')}</h2>
  <p class="meta">To ${escapeHtml(m.to.join(', '))} · from ${escapeHtml(m.from)} · ${escapeHtml(m.receivedAt.toISOString().replace('T', ' ').slice(0, 19))} UTC · <a href="/${m.id}.eml">raw</a></p>
  <pre>${bodyHtml(m.text)}</pre>
</article>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>tronwatch dev mailbox (${messages.length})</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:0 auto;padding:1rem;color:#1b1f24}
article{border:1px solid #d0d7de;border-radius:6px;padding:.75rem 1rem;margin:.75rem 0}
h2{font-size:1.05rem;margin:0} .meta{color:#57606a;margin:.25rem 0 .5rem}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;font:13px/1.45 ui-monospace,monospace}
</style></head><body>
<h1>Development mailbox</h1>
<p>Every e-mail tronwatch sent while <code>tronwatch dev</code> runs (invitations, password resets, alerts), captured locally: nothing left this machine.${consoleUrl ? ` Back to <a href="${escapeHtml(consoleUrl)}">the console</a>.` : ''} Reload to see new messages.</p>
${items || "<p><em>No e-mail yet.</em> Invite a member or ask for a password reset in the console, or wait for the failing receiver's alert.</p>"}
</body></html>`;
}

/**
 * Start the mailbox (module doc) writing `.eml` files into `dir` (created when missing).
 * @throws the listen error when a port cannot be bound.
 */
export async function startMailbox(dir: string): Promise<Mailbox> {
  fs.mkdirSync(dir, { recursive: true });
  let consoleUrl: string | undefined;
  const messages: CapturedMail[] = [];
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', callback);
      stream.on('end', () => {
        const raw = Buffer.concat(chunks);
        simpleParser(raw)
          .then((m) => {
            const id = messages.length + 1;
            fs.writeFileSync(path.join(dir, `${id}.eml`), raw);
            const envelopeTo = session.envelope.rcptTo.map((r) => r.address);
            messages.push({
              id,
              receivedAt: new Date(),
              from: m.from?.text ?? '',
              to: recipients(m).length > 0 ? recipients(m) : envelopeTo,
              subject: m.subject ?? '',
              text: m.text ?? '',
            });
            callback();
          })
          .catch(callback);
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  const smtpPort = (smtp.server.address() as AddressInfo).port;

  const web = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://mailbox');
    if (url.pathname === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(page(messages, consoleUrl));
      return;
    }
    if (url.pathname === '/messages.json') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          [...messages].reverse().map((m) => ({
            id: m.id,
            received_at: m.receivedAt.toISOString(),
            from: m.from,
            to: m.to,
            subject: m.subject,
            text: m.text,
          })),
        ),
      );
      return;
    }
    const eml = /^\/(\d+)\.eml$/.exec(url.pathname);
    const file = eml ? path.join(dir, `${eml[1]}.eml`) : undefined;
    if (file && fs.existsSync(file)) {
      res.writeHead(200, { 'content-type': 'message/rfc822' });
      res.end(fs.readFileSync(file));
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found');
  });
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
  const webPort = (web.address() as AddressInfo).port;

  return {
    smtpUrl: `smtp://127.0.0.1:${smtpPort}`,
    url: `http://127.0.0.1:${webPort}/`,
    dir,
    messages,
    setConsoleUrl(url: string) {
      consoleUrl = url;
    },
    async close() {
      await Promise.all([
        new Promise<void>((resolve) => smtp.close(() => resolve())),
        new Promise<void>((resolve) => {
          web.close(() => resolve());
          web.closeAllConnections();
        }),
      ]);
    },
  };
}
