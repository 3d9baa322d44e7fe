// live.js - every session the caller may see, kept current by
// GET /api/v1/events (one "session" event per session first, then one
// each time a session changes, and "ready" once after the first round).
// The list page, the header's indicator and the session page listen here.

import { stream } from './api.js';

export class LiveSessions extends EventTarget {
  constructor() {
    super();
    this.sessions = new Map();
    this.ready = false;
    this.status = 'connecting';
    this.conn = null;
  }

  start() {
    if (this.conn) return;
    this.conn = stream('/events', {
      reconnect: true,
      onOpen: () => {
        // a reconnection resends everything: a session gone in between
        // (not among the newest any more) is simply kept
        this.ready = false;
      },
      onEvent: (ev) => {
        if (ev.event === 'session') {
          let s;
          try {
            s = JSON.parse(ev.data);
          } catch {
            return;
          }
          if (!s || !s.id) return;
          this.sessions.set(s.id, s);
          this.dispatchEvent(new CustomEvent('session', { detail: s }));
        } else if (ev.event === 'ready') {
          this.ready = true;
          this.dispatchEvent(new Event('ready'));
        }
      },
      onStatus: (status) => this.setStatus(status),
      onError: () => this.setStatus('offline'),
    });
  }

  setStatus(status) {
    if (status === this.status) return;
    this.status = status;
    this.dispatchEvent(new Event('status'));
  }

  stop() {
    if (this.conn) this.conn.close();
    this.conn = null;
    this.sessions.clear();
    this.ready = false;
    this.status = 'connecting';
  }

  // A session learned elsewhere (a POST's answer, a page of older ones).
  put(s) {
    const old = this.sessions.get(s.id);
    if (old && old.updated_ms > s.updated_ms) return;
    this.sessions.set(s.id, s);
    this.dispatchEvent(new CustomEvent('session', { detail: s }));
  }

  get(id) {
    return this.sessions.get(id);
  }

  list() {
    return [...this.sessions.values()].sort((a, b) => b.created_ms - a.created_ms || (a.id < b.id ? 1 : -1));
  }

  // on('session', fn) with an unsubscribe function back
  on(type, fn) {
    this.addEventListener(type, fn);
    return () => this.removeEventListener(type, fn);
  }
}
