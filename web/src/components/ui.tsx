/** The console's building blocks: times, ids, copy buttons, pills, notices, dialogs, fields. */
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { localTime, middle, relative, shortTime, utcIso } from '../format';

/** An instant in the browser's time zone; the UTC ISO value on hover. */
export function Time({
  iso,
  rel = false,
  short = false,
}: {
  iso: string | null;
  rel?: boolean;
  short?: boolean;
}) {
  if (iso === null) return <span class="muted">—</span>;
  return (
    <time dateTime={utcIso(iso)} title={utcIso(iso)} class="time">
      {rel ? relative(iso) : short ? shortTime(iso) : localTime(iso)}
    </time>
  );
}

async function writeClipboard(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Not a secure context or no permission: select-and-copy through a hidden textarea.
    const ta = document.createElement('textarea');
    ta.value = text;
    ta.setAttribute('readonly', '');
    ta.style.position = 'fixed';
    ta.style.opacity = '0';
    document.body.appendChild(ta);
    ta.select();
    const ok = document.execCommand('copy');
    ta.remove();
    return ok;
  }
}

function CopyIcon({ done }: { done: boolean }) {
  return (
    <svg class="icon" viewBox="0 0 16 16" aria-hidden="true" focusable="false">
      {done ? (
        <path d="M3 8.5l3 3 7-7" fill="none" stroke="currentColor" stroke-width="1.8" />
      ) : (
        <>
          <rect
            x="5"
            y="5"
            width="8.5"
            height="8.5"
            rx="1.5"
            fill="none"
            stroke="currentColor"
            stroke-width="1.4"
          />
          <path
            d="M10.5 3.5V3a1.5 1.5 0 0 0-1.5-1.5H3A1.5 1.5 0 0 0 1.5 3v6A1.5 1.5 0 0 0 3 10.5h.5"
            fill="none"
            stroke="currentColor"
            stroke-width="1.4"
          />
        </>
      )}
    </svg>
  );
}

/** A button that copies `text`; `label` names what is copied for screen readers ("Copy secret"). */
export function CopyButton({
  text,
  label = 'Copy',
  compact = false,
}: {
  text: string;
  label?: string;
  compact?: boolean;
}) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  useEffect(() => {
    if (state === 'idle') return undefined;
    const t = setTimeout(() => setState('idle'), 2000);
    return () => clearTimeout(t);
  }, [state]);
  return (
    <button
      type="button"
      class={compact ? 'btn btn-icon' : 'btn btn-secondary btn-small'}
      aria-label={compact ? label : undefined}
      title={label}
      onClick={async () => setState((await writeClipboard(text)) ? 'copied' : 'failed')}
    >
      {compact ? <CopyIcon done={state === 'copied'} /> : state === 'copied' ? 'Copied' : label}
      <span class="sr-only" aria-live="polite">
        {state === 'copied' ? 'Copied to the clipboard' : state === 'failed' ? 'Copy failed' : ''}
      </span>
    </button>
  );
}

/** An id, hash or address in monospace: truncated in the middle, full on hover, copyable. */
export function Mono({
  value,
  keep = 6,
  copy = true,
  full = false,
  label,
}: {
  value: string;
  keep?: number;
  copy?: boolean;
  full?: boolean;
  label?: string;
}) {
  return (
    <span class="mono-wrap">
      <code class="mono" title={value}>
        {full ? value : middle(value, keep)}
      </code>
      {copy && <CopyButton text={value} label={label ?? `Copy ${value}`} compact />}
    </span>
  );
}

export type Tone = 'green' | 'amber' | 'red' | 'gray' | 'blue';

const STATUS_TONE: Record<string, Tone> = {
  PENDING: 'amber',
  DELIVERED: 'green',
  DEAD: 'red',
  ACTIVE: 'green',
  PAUSED: 'gray',
};

export function Pill({ tone, children }: { tone: Tone; children: ComponentChildren }) {
  return <span class={`pill pill-${tone}`}>{children}</span>;
}

export function StatusPill({ status }: { status: string }) {
  return <Pill tone={STATUS_TONE[status] ?? 'gray'}>{status}</Pill>;
}

/** A result message; `polite` live region so screen readers hear async outcomes. */
export function Notice({
  tone = 'info',
  children,
  onDismiss,
}: {
  tone?: 'info' | 'success' | 'error' | 'warning';
  children: ComponentChildren;
  onDismiss?: () => void;
}) {
  return (
    <div class={`notice notice-${tone}`} role={tone === 'error' ? 'alert' : 'status'}>
      <div class="notice-body">{children}</div>
      {onDismiss && (
        <button type="button" class="btn btn-icon" aria-label="Dismiss" onClick={onDismiss}>
          ×
        </button>
      )}
    </div>
  );
}

/** Holds async outcomes for screen readers even before a Notice exists. */
export function LiveRegion({ children }: { children: ComponentChildren }) {
  return (
    <div aria-live="polite" aria-atomic="true">
      {children}
    </div>
  );
}

/** The outcome of a page's last action, in a polite live region; dismissible. */
export type Message = { tone: 'success' | 'error' | 'warning' | 'info'; text: string } | null;

/** Shows `message` (nothing when null) where screen readers hear it arrive. */
export function MessageArea({ message, onDismiss }: { message: Message; onDismiss: () => void }) {
  return (
    <div aria-live="polite">
      {message && (
        <Notice tone={message.tone} onDismiss={onDismiss}>
          {message.text}
        </Notice>
      )}
    </div>
  );
}

/** A secret shown exactly once, with a copy button and the warning that it will not come back. */
export function SecretOnce({
  title,
  secret,
  children,
  onDone,
  copyLabel = 'Copy secret',
}: {
  title: string;
  secret: string;
  children?: ComponentChildren;
  onDone: () => void;
  /** The copy button's words: what is copied ("Copy key"). */
  copyLabel?: string;
}) {
  const ref = useRef<HTMLElement>(null);
  useEffect(() => {
    ref.current?.focus();
  }, []);
  return (
    <section class="secret-once" aria-label={title} tabIndex={-1} ref={ref}>
      <h3>{title}</h3>
      <p>
        <strong>Copy it now: it is shown only this once.</strong> tronwatch stores it in a form it
        cannot show again.
      </p>
      <div class="secret-value">
        <code class="mono" data-testid="secret">
          {secret}
        </code>
        <CopyButton text={secret} label={copyLabel} />
      </div>
      {children}
      <button type="button" class="btn btn-secondary" onClick={onDone}>
        I have saved it
      </button>
    </section>
  );
}

/**
 * A confirmation in a modal <dialog> (focus is trapped and Escape cancels natively).
 * `onConfirm` may be async; the dialog closes when it settles.
 */
export function ConfirmDialog({
  title,
  children,
  confirmLabel,
  danger = false,
  onConfirm,
  onCancel,
}: {
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  onConfirm: () => Promise<void> | void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const titleId = useId();
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
  }, []);
  return (
    <dialog
      ref={ref}
      class="dialog"
      aria-labelledby={titleId}
      onCancel={(e) => {
        e.preventDefault();
        if (!busy) onCancel();
      }}
    >
      <h2 id={titleId}>{title}</h2>
      <div class="dialog-body">{children}</div>
      <div class="dialog-actions">
        <button type="button" class="btn btn-secondary" disabled={busy} onClick={onCancel}>
          Cancel
        </button>
        <button
          type="button"
          class={danger ? 'btn btn-danger' : 'btn btn-primary'}
          disabled={busy}
          onClick={async () => {
            setBusy(true);
            try {
              await onConfirm();
            } finally {
              setBusy(false);
            }
          }}
        >
          {busy ? 'Working…' : confirmLabel}
        </button>
      </div>
    </dialog>
  );
}

export function PageHeader({
  title,
  description,
  actions,
}: {
  title: string;
  description?: ComponentChildren;
  actions?: ComponentChildren;
}) {
  useEffect(() => {
    document.title = `${title} · tronwatch`;
  }, [title]);
  return (
    <header class="page-header">
      <div>
        <h1 tabIndex={-1} data-page-title>
          {title}
        </h1>
        {description && <p class="page-description">{description}</p>}
      </div>
      {actions && <div class="page-actions">{actions}</div>}
    </header>
  );
}

export function EmptyState({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <h2 class="empty-title">{title}</h2>
      {children}
    </div>
  );
}

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p class="loading" role="status">
      {label}
    </p>
  );
}

type FieldProps = {
  label: string;
  hint?: ComponentChildren;
  error?: string | undefined;
  children: (ids: { id: string; describedBy: string | undefined }) => JSX.Element;
};

/** A labelled form control with its hint and error wired through aria-describedby. */
export function Field({ label, hint, error, children }: FieldProps) {
  const id = useId();
  const hintId = `${id}-hint`;
  const errId = `${id}-err`;
  const describedBy =
    [hint ? hintId : '', error ? errId : ''].filter((s) => s !== '').join(' ') || undefined;
  return (
    <div class={`field${error ? ' field-invalid' : ''}`}>
      <label for={id}>{label}</label>
      {children({ id, describedBy })}
      {hint && (
        <p class="hint" id={hintId}>
          {hint}
        </p>
      )}
      {error && (
        <p class="field-error" id={errId}>
          {error}
        </p>
      )}
    </div>
  );
}

/** The rules of a new console password (src/console/passwords.ts): 12 to 256 characters. */
export const NEW_PASSWORD_HINT =
  'At least 12 characters (up to 256). A passphrase of a few words works well.';

/**
 * A password input in a {@link Field}. `kind`: 'current' (the password the user has), 'new' (one
 * being chosen: 12 to 256 characters, described by its hint), 'repeat' (the new one again).
 */
export function PasswordField({
  label,
  kind,
  value,
  onValue,
  hint,
  error,
}: {
  label: string;
  kind: 'current' | 'new' | 'repeat';
  value: string;
  onValue: (v: string) => void;
  hint?: string;
  error?: string | undefined;
}) {
  return (
    <Field label={label} hint={hint} error={error}>
      {({ id, describedBy }) => (
        <input
          id={id}
          type="password"
          autoComplete={kind === 'current' ? 'current-password' : 'new-password'}
          required
          minLength={kind === 'new' ? 12 : undefined}
          maxLength={kind === 'new' ? 256 : undefined}
          aria-describedby={describedBy}
          value={value}
          onInput={(e) => onValue(e.currentTarget.value)}
        />
      )}
    </Field>
  );
}

/** A code block with a copy button (curl commands, payloads). */
export function CodeBlock({
  code,
  label,
  copyLabel = 'Copy',
}: {
  code: string;
  label: string;
  copyLabel?: string;
}) {
  return (
    <div class="codeblock">
      <div class="codeblock-bar">
        <span>{label}</span>
        <CopyButton text={code} label={copyLabel} />
      </div>
      <pre>
        <code>{code}</code>
      </pre>
    </div>
  );
}

/** Headers as a two-column definition list. */
export function HeaderList({ headers }: { headers: Record<string, string> | null }) {
  if (headers === null) return <p class="muted">None recorded.</p>;
  const entries = Object.entries(headers);
  if (entries.length === 0) return <p class="muted">None.</p>;
  return (
    <dl class="headers">
      {entries.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}
