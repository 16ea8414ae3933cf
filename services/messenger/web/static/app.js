// Herald web chat. Plain script, no build step, nothing loaded from elsewhere.
//
// What the person types, and the names of files, are shown with
// textContent only. Butler messages arrive as HTML the server rendered from
// markdown with everything else escaped; the page's Content-Security-Policy
// forbids inline script besides.
'use strict';

(() => {
  const list = document.getElementById('messages');
  const empty = document.getElementById('empty');
  const form = document.getElementById('compose');
  const text = document.getElementById('text');
  const nameInput = document.getElementById('name');
  const statusEl = document.getElementById('status');
  const visitorEl = document.getElementById('visitor');
  const hint = document.getElementById('hint');
  const typingEl = document.getElementById('typing');
  const attachEl = document.getElementById('attach');
  const fileInput = document.getElementById('file');
  const attachedEl = document.getElementById('attached');

  const MAX_TEXT = 16384;
  const OUTBOX = 'herald.outbox'; // posts not yet accepted, kept across reloads
  const NAME = 'herald.name';
  // TYPING_SHOWN is how long one "typing…" shows: the messenger renews it
  // every 4 s while the model works.
  const TYPING_SHOWN = 6000;
  const MAX_FILES = 10; // a message's, as the server takes
  let maxFile = 0; // the largest file the chat takes (hello); 0: none

  const nodes = new Map(); // message id -> its element
  const seen = new Set(); // reaction ids already shown
  const waiting = new Map(); // message id -> reactions that arrived before it
  let lastSeq = 0;

  const make = (tag, className, content) => {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (content !== undefined) e.textContent = content;
    return e;
  };

  const clock = (ts) => {
    const d = ts ? new Date(ts) : new Date();
    return Number.isNaN(d.getTime()) ? '' : d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  };

  // uuid is a version 4 UUID; crypto.randomUUID exists only on https or
  // localhost, getRandomValues everywhere.
  const uuid = () => {
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  };

  // size is n bytes as the server writes them (bus.Bytes): 512 B, 183 KB,
  // 4.2 MB, a limit in MiB as its round "50 MB".
  const size = (n) => {
    if (n > 0 && n % 1048576 === 0) return `${n / 1048576} MB`;
    if (n < 1000) return `${n} B`;
    return n < 1e6 ? `${Math.round(n / 1000)} KB` : `${(n / 1e6).toFixed(1)} MB`;
  };

  // fileList is the files of a message, each a link once the server has
  // it (a file still being sent has none yet).
  const fileList = (files) => {
    const ul = make('ul', 'files');
    for (const f of files) {
      const name = make(f.url ? 'a' : 'span', '', f.name);
      if (f.url) {
        name.href = f.url;
        name.target = '_blank';
        name.rel = 'noopener';
      }
      const li = make('li');
      li.append(name, make('span', 'size', size(f.size)));
      ul.append(li);
    }
    return ul;
  };

  const setFiles = (node, files) => {
    if (!files || !files.length) return;
    const old = node.querySelector('.files');
    if (old) old.replaceWith(fileList(files));
    else node.querySelector('.meta').before(fileList(files));
  };

  const setHint = (msg) => {
    hint.textContent = msg || '';
    hint.hidden = !msg;
  };

  // place adds a message at the end, but above messages still waiting to be
  // sent, and keeps the view at the bottom if it was there.
  const place = (node) => {
    const stick = list.scrollHeight - list.scrollTop - list.clientHeight < 80;
    const pending = node.dataset.pending ? null : list.querySelector('.msg[data-pending]');
    list.insertBefore(node, pending);
    empty.hidden = true;
    if (stick) list.scrollTop = list.scrollHeight;
  };

  const STATES = { sending: 'sending…', retrying: 'not sent, retrying…', sent: '✓' };

  const setState = (node, state, reason) => {
    node.dataset.state = state;
    if (state === 'sending' || state === 'retrying') node.dataset.pending = '1';
    else delete node.dataset.pending;
    node.querySelector('.state').textContent = state === 'failed' ? `not sent: ${reason}` : STATES[state];
  };

  const showVisitor = (m, state) => {
    let node = nodes.get(m.id);
    if (!node) {
      node = make('article', 'msg visitor');
      node.dataset.id = m.id;
      node.append(make('div', 'body', m.text));
      const meta = make('div', 'meta');
      meta.append(make('time', '', clock(m.ts)), make('span', 'state'));
      node.append(meta, make('div', 'reactions'));
      nodes.set(m.id, node);
      if (state !== 'sent') node.dataset.pending = '1';
      place(node);
      for (const r of waiting.get(m.id) || []) react(r);
      waiting.delete(m.id);
    }
    setFiles(node, m.files);
    setState(node, state);
  };

  // butlerBody is a butler message's text, as the server rendered it
  // (markdown.HTML): only formatting tags, every character of the butler's
  // text escaped.
  const butlerBody = (html) => {
    const body = make('div', 'body');
    body.innerHTML = html || '';
    for (const a of body.querySelectorAll('a')) {
      a.target = '_blank';
      a.rel = 'noopener noreferrer';
    }
    return body;
  };

  // actionRow is the buttons under butler message id, or null for none; a
  // press answers that message.
  const actionRow = (id, actions) => {
    if (!actions || !actions.length) return null;
    const row = make('div', 'actions');
    row.dataset.actions = JSON.stringify(actions);
    for (const action of actions) {
      const button = make('button', 'action', action.label);
      button.type = 'button';
      button.addEventListener('click', () => {
        for (const b of row.querySelectorAll('button')) b.disabled = true;
        button.classList.add('chosen');
        send(action.label, { callback_data: action.data, reply_to: id });
      });
      row.append(button);
    }
    return row;
  };

  // "<butler> is typing…": shown a while after each typing event, and gone
  // as soon as that butler's message or reaction arrives.
  const typists = new Map(); // butler -> its timer
  const showTyping = () => {
    const names = [...typists.keys()];
    typingEl.textContent = names.length ? `${names.join(', ')} ${names.length > 1 ? 'are' : 'is'} typing…` : '';
    typingEl.hidden = !names.length;
  };
  const typing = (butler) => {
    clearTimeout(typists.get(butler));
    typists.set(butler, setTimeout(() => typed(butler), TYPING_SHOWN));
    showTyping();
  };
  const typed = (butler) => {
    if (!typists.has(butler)) return;
    clearTimeout(typists.get(butler));
    typists.delete(butler);
    showTyping();
  };

  // quoted is what a reply quotes of a visitor message: its text, or the
  // names of its files when it had none.
  const quoted = (node) =>
    node.querySelector('.body').textContent ||
    [...node.querySelectorAll('.files li > :first-child')].map((e) => e.textContent).join(', ');

  const showButler = (m) => {
    typed(m.butler || 'butler');
    if (nodes.has(m.id)) return;
    const node = make('article', m.urgency === 'high' ? 'msg butler urgent' : 'msg butler');
    node.dataset.id = m.id;
    node.append(make('div', 'who', m.butler || 'butler'));
    const original = m.reply_to && nodes.get(m.reply_to);
    if (original) node.append(make('div', 'quote', quoted(original)));
    if (m.subject) node.append(make('div', 'subject', m.subject));
    node.append(butlerBody(m.html));
    if (m.files && m.files.length) node.append(fileList(m.files));
    const row = actionRow(m.id, m.actions);
    if (row) node.append(row);
    const meta = make('div', 'meta');
    meta.append(make('time', '', clock(m.ts)));
    node.append(meta);
    nodes.set(m.id, node);
    place(node);
  };

  // edit replaces the text and buttons of a butler message on the page (a
  // permission prompt once answered): no buttons take them away, the same
  // ones stay as they are (a press already made still shows). An edit of a
  // message the page does not show is ignored; edits come in order, after
  // their message, live and on replay alike.
  const edit = (m) => {
    const node = nodes.get(m.target);
    if (!node || !node.classList.contains('butler')) return;
    node.querySelector('.body').replaceWith(butlerBody(m.html));
    const old = node.querySelector('.actions');
    const actions = m.actions && m.actions.length ? JSON.stringify(m.actions) : '';
    if (!old || old.dataset.actions !== actions) {
      const row = actionRow(m.target, m.actions);
      if (old && row) old.replaceWith(row);
      else if (old) old.remove();
      else if (row) node.querySelector('.meta').before(row);
    }
    const meta = node.querySelector('.meta');
    if (!meta.querySelector('.edited')) meta.prepend(make('span', 'edited', 'edited'));
  };

  const react = (m) => {
    typed(m.butler || 'butler');
    if (seen.has(m.id)) return;
    const target = nodes.get(m.target);
    if (!target) {
      waiting.set(m.target, [...(waiting.get(m.target) || []), m]);
      return;
    }
    seen.add(m.id);
    const badge = make('span', 'reaction', m.emoji);
    badge.title = m.butler || '';
    (target.querySelector('.reactions') || target).append(badge);
  };

  const show = (m) => {
    if (m.kind === 'visitor') showVisitor(m, 'sent');
    else if (m.kind === 'butler') showButler(m);
    else if (m.kind === 'reaction') react(m);
    else if (m.kind === 'edit') edit(m);
  };

  // Outbox: a post stays here until the server accepted it, so a reload or a
  // closed laptop does not lose it. The server deduplicates by client_id.
  const outbox = () => {
    try {
      return JSON.parse(localStorage.getItem(OUTBOX)) || [];
    } catch {
      return [];
    }
  };
  const saveOutbox = (items) => localStorage.setItem(OUTBOX, JSON.stringify(items));
  const done = (id) => saveOutbox(outbox().filter((i) => i.client_id !== id));

  // request is the post of item: JSON, or with files a form whose first
  // part is that JSON (the browser sets its multipart Content-Type).
  const request = (item, files) => {
    if (!files.length) {
      return { headers: { 'Content-Type': 'application/json', 'X-Herald': '1' }, body: JSON.stringify(item) };
    }
    const form = new FormData();
    form.append('message', JSON.stringify(item));
    for (const f of files) form.append('file', f, f.name);
    return { headers: { 'X-Herald': '1' }, body: form };
  };

  const deliver = async (item, files = [], attempt = 0) => {
    let res = null;
    try {
      res = await fetch('/api/messages', { method: 'POST', credentials: 'same-origin', ...request(item, files) });
    } catch {
      // offline or the messenger is restarting: retry below
    }
    const node = nodes.get(item.client_id);
    if (res && res.status === 202) {
      done(item.client_id);
      if (node) setState(node, 'sent');
      return;
    }
    if (res && res.status < 500) {
      // Refused: sending it again cannot help.
      let reason = `error ${res.status}`;
      try {
        reason = (await res.json()).error || reason;
      } catch {}
      done(item.client_id);
      if (node) setState(node, 'failed', reason);
      return;
    }
    if (node) setState(node, 'retrying');
    setTimeout(() => deliver(item, files, attempt + 1), Math.min(30000, 1000 * 2 ** attempt));
  };

  // send posts a message. One with files is retried while the page is
  // open but not kept in the outbox: a reload cannot keep the files.
  const send = (value, extra = {}, files = []) => {
    const item = { client_id: uuid(), text: value, ...extra };
    const name = nameInput.value.trim();
    if (name) item.name = name;
    if (!files.length) saveOutbox([...outbox(), item]);
    const shown = files.map((f) => ({ name: f.name, size: f.size }));
    showVisitor({ id: item.client_id, text: value, ts: new Date().toISOString(), files: shown }, 'sending');
    deliver(item, files);
  };

  // Files to go with the next message: chosen or pasted, each checked
  // against the chat's limits before anything is sent.
  let chosen = [];
  const showChosen = () => {
    attachedEl.replaceChildren(
      ...chosen.map((f) => {
        const li = make('li', '', `${f.name} (${size(f.size)})`);
        const remove = make('button', '', '×');
        remove.type = 'button';
        remove.title = `Remove ${f.name}`;
        remove.addEventListener('click', () => {
          chosen = chosen.filter((c) => c !== f);
          showChosen();
        });
        li.append(remove);
        return li;
      }),
    );
    attachedEl.hidden = !chosen.length;
  };
  const attach = (files) => {
    for (const f of files) {
      if (chosen.length >= MAX_FILES) {
        setHint(`At most ${MAX_FILES} files go with one message.`);
        break;
      }
      if (f.size > maxFile) setHint(`${f.name} is too big: at most ${size(maxFile)} a file.`);
      else chosen.push(f);
    }
    showChosen();
  };
  fileInput.addEventListener('change', () => {
    attach(fileInput.files);
    fileInput.value = '';
  });
  text.addEventListener('paste', (e) => {
    if (!maxFile || !e.clipboardData.files.length) return;
    e.preventDefault();
    attach(e.clipboardData.files);
  });

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const value = text.value;
    if (!value.trim() && !chosen.length) return;
    if (new TextEncoder().encode(value).length > MAX_TEXT) {
      setHint(`That message is too long: at most ${MAX_TEXT / 1024} KiB.`);
      return;
    }
    setHint('');
    text.value = '';
    send(value, {}, chosen);
    chosen = [];
    showChosen();
    text.focus();
  });

  const plainEnter = (e) => e.key === 'Enter' && !e.shiftKey && !e.isComposing;
  text.addEventListener('keydown', (e) => {
    if (plainEnter(e)) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  // Some input paths deliver Enter's character apart from its keydown.
  text.addEventListener('keypress', (e) => {
    if (plainEnter(e)) e.preventDefault();
  });

  nameInput.value = localStorage.getItem(NAME) || '';
  nameInput.addEventListener('change', () => localStorage.setItem(NAME, nameInput.value.trim()));

  const setStatus = (state, label) => {
    statusEl.dataset.state = state;
    statusEl.textContent = label;
  };

  // connect follows the conversation. The browser reconnects by itself with
  // Last-Event-ID; if it gives up (the server answered with an error: too
  // many tabs open, the messenger restarting), a new stream starts after the
  // last event seen, waiting longer after each refusal.
  let pause = 2000;
  const connect = () => {
    const es = new EventSource(lastSeq ? `/api/events?after=${lastSeq}` : '/api/events');
    es.addEventListener('hello', (e) => {
      const hello = JSON.parse(e.data);
      visitorEl.textContent = hello.visitor;
      maxFile = hello.max_file || 0;
      attachEl.hidden = !maxFile;
    });
    es.addEventListener('typing', (e) => typing(JSON.parse(e.data).butler || 'butler'));
    es.onopen = () => {
      pause = 2000;
      setStatus('live', 'connected');
    };
    es.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.seq > lastSeq) lastSeq = m.seq;
      show(m);
    };
    es.onerror = () => {
      setStatus('down', 'reconnecting…');
      if (es.readyState === EventSource.CLOSED) {
        setTimeout(connect, pause / 2 + Math.random() * (pause / 2));
        pause = Math.min(pause * 2, 30000);
      }
    };
  };

  connect();
  for (const item of outbox()) {
    showVisitor({ id: item.client_id, text: item.text }, 'sending');
    deliver(item);
  }
})();
