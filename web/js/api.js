// api.js - the one way the page talks to the server: JSON requests with the
// bearer token, and Server-Sent Events read through fetch() (EventSource
// cannot send an Authorization header, and the token must stay out of URLs).

const TOKEN_KEY = 'warren.token';
const BASE = '/api/v1';

// The token lives in sessionStorage: gone when the tab closes, never sent
// anywhere but in the Authorization header of our own requests.
export function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  try {
    sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    /* storage unavailable: nothing to clear */
  }
}

// Fired (on `authEvents`) when the server refuses our token: the app goes
// back to the sign-in page.
export const authEvents = new EventTarget();

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }

  // What a person reads: "Not found: session s-… not found (404)".
  describe() {
    if (this.status === 0) return this.message;
    return `${this.message} (${this.status}${this.code ? ' ' + this.code : ''})`;
  }
}

async function errorFrom(res) {
  let code = '';
  let message = `${res.status} ${res.statusText || 'error'}`;
  try {
    const body = await res.json();
    if (body && body.error) {
      code = String(body.error.code || '');
      message = String(body.error.message || message);
    }
  } catch {
    /* not JSON: keep the status line */
  }
  return new ApiError(res.status, code, message);
}

function unauthorized(err, token) {
  // Only the stored token's refusal signs the user out; a candidate
  // token tried on the sign-in page just fails.
  if (err.status === 401 && token === getToken()) {
    clearToken();
    authEvents.dispatchEvent(new CustomEvent('unauthorized', { detail: err }));
  }
}

export function url(path, query) {
  let u = BASE + path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    }
    const s = q.toString();
    if (s) u += '?' + s;
  }
  return u;
}

// request('GET', '/sessions', {query, body, signal, token, as})
//   as: 'json' (default), 'text', 'blob', 'response'
export async function request(method, path, opts = {}) {
  const token = opts.token ?? getToken();
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers, signal: opts.signal, cache: 'no-store' };
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  }
  let res;
  try {
    res = await fetch(url(path, opts.query), init);
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', 'The server could not be reached. Check that warren serve is running.');
  }
  if (!res.ok) {
    const err = await errorFrom(res);
    unauthorized(err, token);
    throw err;
  }
  switch (opts.as || 'json') {
    case 'text':
      return res.text();
    case 'blob':
      return res.blob();
    case 'response':
      return res;
    default:
      return res.status === 204 ? null : res.json();
  }
}

export const get = (path, opts) => request('GET', path, opts);
export const post = (path, body, opts = {}) => request('POST', path, { ...opts, body: body ?? {} });
export const del = (path, opts) => request('DELETE', path, opts);

// ---- Server-Sent Events ----------------------------------------------------

// Parses an SSE byte stream (already decoded to text) into events:
// {id, event, data}. Comments (": keepalive") only count as signs of life.
export class SseParser {
  constructor(onEvent, onComment) {
    this.onEvent = onEvent;
    this.onComment = onComment || (() => {});
    this.buf = '';
    this.reset();
  }

  reset() {
    this.event = '';
    this.data = [];
    this.id = null;
  }

  push(text) {
    this.buf += text;
    // a trailing \r may be the first half of \r\n: keep it for the next chunk
    const end = this.buf.endsWith('\r') ? this.buf.length - 1 : this.buf.length;
    const lines = this.buf.slice(0, end).split(/\r\n|\n|\r/);
    this.buf = lines.pop() + this.buf.slice(end);
    for (const l of lines) this.line(l);
  }

  line(line) {
    if (line === '') {
      if (this.data.length) {
        this.onEvent({ id: this.id, event: this.event || 'message', data: this.data.join('\n') });
      }
      this.reset();
      return;
    }
    if (line.startsWith(':')) {
      this.onComment(line.slice(1).trim());
      return;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.id = value;
  }
}

const BACKOFF_MS = [500, 1000, 2000, 5000, 10000];
const SILENCE_MS = 45000; // the server sends a keepalive every 15 s

// stream(path, handlers) follows an SSE route until closed.
//   onEvent({id, event, data})   each event (data is the raw string)
//   onOpen()                     headers received
//   onEnd()                      the server ended the stream (when !reconnect)
//   onStatus('live'|'retrying', err)  connection state, for an indicator
//   onError(ApiError)            a refusal (4xx): the stream stops
//   reconnect: also reconnect when the server ends the stream normally
//   lastEventId: resume after this id (sent as Last-Event-ID)
// Returns {close(), lastEventId()}.
export function stream(path, handlers) {
  const h = { onEvent() {}, onOpen() {}, onEnd() {}, onStatus() {}, onError() {}, ...handlers };
  let lastId = h.lastEventId != null ? String(h.lastEventId) : null;
  let closed = false;
  let ctrl = null;
  let timer = null;
  let attempt = 0;

  const schedule = (err) => {
    if (closed) return;
    h.onStatus('retrying', err);
    const wait = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)];
    attempt++;
    timer = setTimeout(connect, wait);
  };

  async function connect() {
    if (closed) return;
    const token = getToken();
    if (!token) return;
    ctrl = new AbortController();
    let watchdog = null;
    const alive = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => ctrl.abort(), SILENCE_MS);
    };
    const headers = { Accept: 'text/event-stream', Authorization: `Bearer ${token}` };
    if (lastId !== null) headers['Last-Event-ID'] = lastId;
    try {
      const res = await fetch(url(path, h.query), { headers, signal: ctrl.signal, cache: 'no-store' });
      if (!res.ok) {
        const err = await errorFrom(res);
        unauthorized(err, token);
        if (res.status >= 500) {
          schedule(err);
        } else if (!closed) {
          h.onError(err);
        }
        return;
      }
      attempt = 0;
      alive();
      h.onStatus('live');
      h.onOpen();
      const parser = new SseParser(
        (ev) => {
          if (ev.id !== null) lastId = ev.id;
          if (!closed) h.onEvent(ev);
        },
        () => {},
      );
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        alive();
        parser.push(decoder.decode(value, { stream: true }));
      }
      clearTimeout(watchdog);
      if (closed) return;
      if (h.reconnect) schedule(null);
      else h.onEnd();
    } catch (e) {
      clearTimeout(watchdog);
      if (closed) return;
      schedule(e);
    }
  }

  connect();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      if (ctrl) ctrl.abort();
    },
    lastEventId: () => lastId,
  };
}
