/**
 * Every error answer of the HTTP app, in one place (CONVENTIONS habit 4; DESIGN invariant 9).
 *
 *   ApiError                         → its status, body and headers
 *   schema validation failure        → 400 { error, details: FieldError[] }
 *   malformed JSON / empty-length    → 400 { error, details: [{ field: 'body', … }] }
 *   Content-Type other than JSON     → 415 { error }
 *   body over the limit              → 413 { error }
 *   malformed URL (bad %-encoding)   → 400 { error }
 *   unknown route                    → 404 { error }
 *   unparseable HTTP (clientError)   → 431 / 408 / 400 { error }, connection closed
 *   anything else                    → logged with its stack, 500 {"error":"internal server error"}
 *
 * Bad input never reaches the last line: every framework error about the request (Fastify's
 * FST_* errors with a 4xx status) keeps its 4xx status with the contract's body.
 */
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, type ErrorBody, INTERNAL_ERROR_BODY } from '../common/errors.js';
import type { FieldError } from './schemas.js';
import type { App } from './types.js';

/** One ajv error as Fastify attaches it to a validation error (`error.validation`). */
interface AjvIssue {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
}

interface ErrorReply {
  status: number;
  body: ErrorBody;
  headers: Record<string, string>;
}

const CONTEXT_NAMES: Record<string, { field: string; message: string }> = {
  body: { field: 'body', message: 'invalid request body' },
  querystring: { field: 'query', message: 'invalid query parameters' },
  params: { field: 'path', message: 'invalid path parameters' },
  headers: { field: 'headers', message: 'invalid request headers' },
};

/** `/a/b~1c` (JSON pointer) → `a.b/c`. */
function pointerToField(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
}

/** ajv issues → FieldError[] (one per field and message). */
export function fieldErrors(issues: readonly AjvIssue[], context: string): FieldError[] {
  const whole = CONTEXT_NAMES[context]?.field ?? context;
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of issues) {
    let field = pointerToField(e.instancePath);
    const child =
      e.keyword === 'required'
        ? e.params.missingProperty
        : e.keyword === 'additionalProperties'
          ? e.params.additionalProperty
          : undefined;
    if (typeof child === 'string') field = field ? `${field}.${child}` : child;
    if (field === '') field = whole;
    let message = e.message ?? `failed ${e.keyword}`;
    if (e.keyword === 'enum' && Array.isArray(e.params.allowedValues)) {
      message += `: ${e.params.allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    }
    const k = `${field}\n${message}`;
    if (seen.has(k)) continue;
    seen.add(k);
    out.push({ field, message });
  }
  return out;
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null;
}

/**
 * The answer for `err`, or null when it is not a known client error (then: 500).
 * @param bodyLimit the app's body limit in bytes, named in the 413 message.
 */
export function errorReply(err: unknown, bodyLimit: number): ErrorReply | null {
  if (err instanceof ApiError) {
    return { status: err.status, body: err.body(), headers: err.headers };
  }
  if (!isObject(err)) return null;
  if (Array.isArray(err.validation)) {
    const context = typeof err.validationContext === 'string' ? err.validationContext : 'body';
    return {
      status: 400,
      body: {
        error: CONTEXT_NAMES[context]?.message ?? 'invalid request',
        details: fieldErrors(err.validation as AjvIssue[], context),
      },
      headers: {},
    };
  }
  const code = typeof err.code === 'string' ? err.code : '';
  switch (code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return badBody('malformed JSON body', 'body is not valid JSON');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return badBody('malformed JSON body', 'body is empty');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return badBody('malformed request body', 'body size does not match Content-Length');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return {
        status: 415,
        body: { error: 'unsupported Content-Type: send application/json' },
        headers: {},
      };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return {
        status: 413,
        body: { error: `request body too large: at most ${bodyLimit} bytes` },
        headers: {},
      };
  }
  // Any other framework error about the request itself keeps its 4xx status.
  const status = typeof err.statusCode === 'number' ? err.statusCode : 0;
  if (code.startsWith('FST_') && status >= 400 && status < 500 && typeof err.message === 'string') {
    return { status, body: { error: err.message }, headers: {} };
  }
  return null;
}

function badBody(error: string, message: string): ErrorReply {
  return { status: 400, body: { error, details: [{ field: 'body', message }] }, headers: {} };
}

/** Send `err` as its error answer; unknown errors are logged with their stack and become a bare 500. */
export function sendError(
  err: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
  bodyLimit: number,
): FastifyReply {
  const r = errorReply(err, bodyLimit);
  if (r === null) {
    request.log.error({ err }, 'unhandled error');
    return reply.code(500).send(INTERNAL_ERROR_BODY);
  }
  if (r.status >= 500) request.log.warn({ status: r.status, reason: r.body.error }, 'unavailable');
  for (const [name, value] of Object.entries(r.headers)) reply.header(name, value);
  return reply.code(r.status).send(r.body);
}

/**
 * Install the error handler and the 404 handler.
 * @param verifyCaller looks up in the database a caller the guard took from the key cache
 *   (`request.auth.verified` false, src/api/auth.ts) and throws its 401 when the key has been
 *   revoked since: an error answer to such a request is then that 401, as it would have been
 *   without the cache (a revoked key is answered revoked_api_key, not, say, 400).
 */
export function registerErrorHandling(
  app: App,
  bodyLimit: number,
  verifyCaller?: (request: FastifyRequest) => Promise<void>,
): void {
  app.setErrorHandler(async (err, request, reply) => {
    let answer: unknown = err;
    if (verifyCaller && request.auth?.verified === false) {
      try {
        await verifyCaller(request);
      } catch (authErr) {
        answer = authErr;
      }
    }
    return sendError(answer, request, reply, bodyLimit);
  });
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ error: 'not found' }));
}

/**
 * Fastify's `clientErrorHandler`: a request Node's HTTP parser refused before Fastify saw it —
 * headers (or URL) over Node's 16 KiB limit → 431, a request not complete in time → 408, bad
 * framing (Content-Length with Transfer-Encoding, a malformed request line, bytes left over
 * after a body shorter than its Content-Length) → 400 — gets the contract's `{ error }` body,
 * then the connection is closed. No route ran, so no rate-limit headers.
 */
export function clientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, error] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'request header fields too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'request timeout']
        : [400, 'Bad Request', 'malformed HTTP request'];
  const body = JSON.stringify({ error });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
