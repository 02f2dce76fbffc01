/** Display helpers. Amounts are never formatted through Number: they are shown as received. */

const dateTime = new Intl.DateTimeFormat(undefined, {
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});

const shortDateTime = new Intl.DateTimeFormat(undefined, {
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});

/** Like localTime, without the year when it is the current one (dense tables). */
export function shortTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.getFullYear() === new Date().getFullYear()
    ? shortDateTime.format(d)
    : dateTime.format(d);
}

/** The instant in the browser's time zone, e.g. "Jan 8, 2026, 14:36:54". */
export function localTime(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : dateTime.format(d);
}

/** "12 s ago", "3 min ago", "in 5 min"; whole units, rounded down. */
export function relative(iso: string, now = Date.now()): string {
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return '';
  const diff = Math.round((t - now) / 1000);
  const abs = Math.abs(diff);
  const [n, unit] =
    abs < 60
      ? [abs, 's']
      : abs < 3600
        ? [Math.floor(abs / 60), 'min']
        : abs < 86400
          ? [Math.floor(abs / 3600), 'h']
          : [Math.floor(abs / 86400), 'd'];
  return diff < 0 || abs === 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
}

/** The UTC ISO form, e.g. "2026-01-08T13:36:54.000Z" (the hover text of every time). */
export function utcIso(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toISOString();
}

/** "1 failed attempt", "14 failed attempts": the count and the noun it agrees with. */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString('en')} ${n === 1 ? one : many}`;
}

/**
 * A reason stored as text by the server (an alert's, an automatic pause's) made readable: ISO
 * instants as local times, "<x> days" as a duration ("0.002 days" → "2 min 53 s"), and "1 …
 * attempts" in the singular.
 */
export function readableReason(text: string): string {
  return text
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z/g, (iso) => localTime(iso))
    .replace(/\b(\d+(?:\.\d+)?) days\b/g, (_m, d: string) => seconds(Number(d) * 86_400))
    .replace(/(^|[^\d.])1 ((?:failed |delivery )?)attempts\b/g, '$11 $2attempt');
}

/**
 * An open alert in words, with the count as it is now (the stored reason keeps the count that
 * opened the alert: "5 … in a row" while 14 have failed since): "14 failed attempts in a row",
 * and when a delivery went DEAD, that too.
 */
export function failingNow(consecutiveFailures: number, storedReason: string): string {
  const count = `${plural(consecutiveFailures, 'failed attempt')} in a row`;
  return /went DEAD/.test(storedReason)
    ? `a delivery failed all its attempts and went DEAD; ${count}`
    : count;
}

/** "TRSqa…7Hx9": `keep` characters each side. */
export function middle(s: string, keep = 6): string {
  return s.length <= keep * 2 + 1 ? s : `${s.slice(0, keep)}…${s.slice(-keep)}`;
}

/** Local datetime-local input value ("2026-01-08T14:36") → ISO UTC; '' for empty or invalid. */
export function localInputToIso(value: string): string {
  if (value === '') return '';
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

/** ISO → the datetime-local input value in the browser's zone. */
export function isoToLocalInput(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function durationMs(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/** A user-agent string → "Chrome on Linux"; the raw string stays in the title. */
export function describeAgent(ua: string | null): string {
  if (ua === null || ua === '') return 'Unknown device';
  const browser = /Edg\//.test(ua)
    ? 'Edge'
    : /Firefox\//.test(ua)
      ? 'Firefox'
      : /Chrome\/|Chromium\//.test(ua)
        ? 'Chrome'
        : /Safari\//.test(ua)
          ? 'Safari'
          : /curl\//.test(ua)
            ? 'curl'
            : null;
  const os = /Windows/.test(ua)
    ? 'Windows'
    : /iPhone|iPad/.test(ua)
      ? 'iOS'
      : /Mac OS X|Macintosh/.test(ua)
        ? 'macOS'
        : /Android/.test(ua)
          ? 'Android'
          : /Linux/.test(ua)
            ? 'Linux'
            : null;
  if (browser && os) return `${browser} on ${os}`;
  return browser ?? os ?? middle(ua, 20);
}

/**
 * Tronscan's page of a transaction on the event's network (Nile's explorer for a test network's
 * transaction), or null for a test transfer (`test_…`, POST /v1/test/transfers): it is on no chain.
 */
export function tronscanTx(txId: string, network = 'mainnet'): string | null {
  if (txId.startsWith('test_')) return null;
  const host = network === 'nile' ? 'https://nile.tronscan.org' : 'https://tronscan.org';
  return `${host}/#/transaction/${encodeURIComponent(txId)}`;
}

/** Seconds → "45 s", "3 min 20 s", "2 h 5 min", and from two days on "331 days 7 h". */
export function seconds(total: number): string {
  const s = Math.max(0, Math.round(total));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  if (s >= 2 * 86_400) {
    const h = Math.floor((s % 86_400) / 3600);
    return `${Math.floor(s / 86_400)} days${h ? ` ${h} h` : ''}`;
  }
  const m = Math.floor((s % 3600) / 60);
  return `${Math.floor(s / 3600)} h${m ? ` ${m} min` : ''}`;
}

/**
 * Indent compact JSON text for reading, character by character: strings and numbers are copied
 * as they are (JSON.parse would round integers past 2^53). Whitespace outside strings is dropped.
 */
export function indentJson(text: string, unit = '  '): string {
  let out = '';
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    if (inString) {
      out += c;
      if (c === '\\') {
        out += text.charAt(i + 1);
        i++;
      } else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      out += c;
    } else if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      if (text.charAt(i + 1) === close) {
        out += c + close;
        i++;
      } else {
        depth++;
        out += `${c}\n${unit.repeat(depth)}`;
      }
    } else if (c === '}' || c === ']') {
      depth = Math.max(0, depth - 1);
      out += `\n${unit.repeat(depth)}${c}`;
    } else if (c === ',') {
      out += `,\n${unit.repeat(depth)}`;
    } else if (c === ':') {
      out += ': ';
    } else if (c.trim() !== '') {
      out += c;
    }
  }
  return out;
}

/**
 * Why a delivery is held (issue 36 item 5; `delivery.held.reason`), in words: a provider-proof
 * transfer is delivered only once a second node provider confirms it.
 */
export function heldWords(reason: string): string {
  const what =
    'only one node provider reported this transfer (a log inside another contract’s call, which no block header commits to)';
  switch (reason) {
    case 'awaiting_confirmation':
      return `Held: ${what}; waiting for a second provider to confirm it. It is delivered once one does.`;
    case 'single_provider':
      return `Held: ${what}, and this deployment has only one provider, so nothing can confirm it: it stays held until the operator adds a second provider (or opts in to delivering such transfers unconfirmed).`;
    case 'contradicted':
      return `Held: ${what}, and another provider contradicts it. It is not delivered; check the transaction yourself before crediting it.`;
    default:
      return `Held: ${reason}`;
  }
}
