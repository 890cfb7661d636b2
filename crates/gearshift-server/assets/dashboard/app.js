// Gearshift dashboard: plain JS, no dependencies. Reads /api/v1/*, follows
// /api/v1/events. Every server string reaches the page through textContent
// (el() below), never through innerHTML.
'use strict';
(function () {
  var API = '/api/v1';
  var TOKEN_KEY = 'gearshift.token';
  var LIVE_STATES = { queued: 1, scheduled: 1, retrying: 1, running: 1 };
  var view = document.getElementById('view');
  var feed = document.getElementById('event-feed');
  var route = { name: '', arg: '' };
  var timer = null;          // the current view's polling timer
  var generation = 0;        // bumps on each route change; stale replies are ignored
  var dead = { fn: '', cursors: [''], selected: {} };
  var askedToken = false;

  // ---- DOM helpers -------------------------------------------------------
  function el(tag, attrs) {
    var e = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        if (k === 'text') e.textContent = String(v);
        else if (k === 'class') e.className = v;
        else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? '' : String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }
  function add(parent, c) {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { add(parent, x); }); return; }
    parent.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function replace(e) { clear(view); for (var i = 0; i < arguments.length; i++) add(view, arguments[i]); }
  function jobLink(handle) {
    return el('a', { href: '#/job/' + encodeURIComponent(handle), class: 'mono', 'data-testid': 'job-link-' + handle, text: handle });
  }
  function table(cls, headers, rows) {
    return el('div', { class: 'table-wrap' },
      el('table', { class: cls },
        el('thead', null, el('tr', null, headers.map(function (h) { return el('th', null, h); }))),
        el('tbody', null, rows)));
  }
  function td(text, attrs) { attrs = attrs || {}; attrs.text = text; return el('td', attrs); }
  function tdLabel(label, child, attrs) { attrs = attrs || {}; attrs['data-label'] = label; return el('td', attrs, child); }

  // ---- formatting --------------------------------------------------------
  function pad(n) { return n < 10 ? '0' + n : '' + n; }
  function clock(ms) {
    if (ms === null || ms === undefined) return '–';
    var d = new Date(ms), now = new Date();
    var t = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
    if (d.toDateString() === now.toDateString()) return t;
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + t;
  }
  function ago(ms) {
    if (ms === null || ms === undefined) return '–';
    var s = Math.round((Date.now() - ms) / 1000), fut = s < 0;
    s = Math.abs(s);
    var txt = s < 60 ? s + 's' : s < 3600 ? Math.floor(s / 60) + 'm' : s < 86400 ? Math.floor(s / 3600) + 'h' : Math.floor(s / 86400) + 'd';
    return fut ? 'in ' + txt : txt + ' ago';
  }
  function when(ms) { return ms === null || ms === undefined ? '–' : clock(ms) + ' (' + ago(ms) + ')'; }
  function num(n) { return n === null || n === undefined ? '–' : String(n); }
  // A client-chosen name as the admin listings print it: control bytes
  // (Perl's prefix TAB, say) as \xNN, so no two names look alike.
  function shown(name) {
    return String(name === null || name === undefined ? '' : name).replace(/[\x00-\x1f\x7f]/g, function (c) {
      var h = c.charCodeAt(0).toString(16);
      return '\\x' + (h.length < 2 ? '0' + h : h);
    });
  }
  // A job's last failed run, apart from how it ended (it may have completed later).
  function lastFailure(f) {
    if (!f) return 'none';
    var what = f.reason && f.error !== f.reason ? f.reason + ': ' + f.error : (f.error || f.reason || '');
    var at = [];
    if (f.attempt) at.push('attempt ' + f.attempt);
    if (f.at_ms) at.push(clock(f.at_ms));
    return at.length ? what + ' (' + at.join(', ') + ')' : what;
  }
  function bytes(n) {
    if (n === null || n === undefined) return '–';
    return n < 1024 ? n + ' B' : n < 1048576 ? (n / 1024).toFixed(1) + ' KiB' : (n / 1048576).toFixed(1) + ' MiB';
  }

  // ---- messages ----------------------------------------------------------
  var msgTimer = null;
  function say(text, kind) {
    var m = document.getElementById('message');
    m.textContent = text;
    m.className = 'message ' + (kind || 'info');
    m.hidden = false;
    clearTimeout(msgTimer);
    if (kind !== 'error') msgTimer = setTimeout(function () { m.hidden = true; }, 4000);
  }
  document.getElementById('message').addEventListener('click', function () { this.hidden = true; });

  // ---- API ---------------------------------------------------------------
  function token() { try { return localStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; } }
  function setToken(t) {
    try { if (t) localStorage.setItem(TOKEN_KEY, t); else localStorage.removeItem(TOKEN_KEY); } catch (e) { /* private mode */ }
  }
  function askToken(why) {
    var t = window.prompt(why + '\nEnter the API token (kept in this browser; empty clears it):', token());
    if (t === null) return false;
    setToken(t.trim());
    return true;
  }
  document.getElementById('token-btn').addEventListener('click', function () {
    if (askToken('Gearshift API token.')) say(token() ? 'Token saved in this browser.' : 'Token cleared.', 'ok');
  });

  function ApiError(status, text) { this.status = status; this.message = text; }
  function api(method, path, body, retried) {
    var headers = { 'Accept': 'application/json' };
    var t = token();
    if (t) headers['Authorization'] = 'Bearer ' + t;
    var opts = { method: method, headers: headers, cache: 'no-store' };
    if (body !== undefined) { headers['Content-Type'] = 'application/json'; opts.body = JSON.stringify(body); }
    return fetch(path, opts).then(function (r) {
      return r.text().then(function (txt) {
        var data = null;
        try { data = txt ? JSON.parse(txt) : null; } catch (e) { data = null; }
        if (r.ok) return data;
        var why = (data && data.error) || (r.status + ' ' + r.statusText);
        if (r.status === 401 && !retried && (method !== 'GET' || !askedToken)) {
          askedToken = true;
          if (askToken('The server needs a token (401: ' + why + ').')) return api(method, path, body, true);
        }
        if (r.status === 401) throw new ApiError(401, 'Not authorized (401): ' + why + '. Set the token with the Token button.');
        if (r.status === 403) throw new ApiError(403, 'Refused (403): ' + why + '. Changes from another host need a token configured on the server (--http-token-file).');
        throw new ApiError(r.status, why + ' (' + r.status + ')');
      });
    }, function (e) { throw new ApiError(0, 'Cannot reach the server: ' + e.message); });
  }
  function act(method, path, body, done) {
    return api(method, path, body).then(function (r) {
      if (done) say(done(r || {}), 'ok');
      refreshSoon(0);
      return r;
    }, function (e) { say(e.message, 'error'); });
  }
  // Renders a reply unless the route changed meanwhile. A `stable` view is not
  // rebuilt when nothing it shows changed, so a refresh does not take a row
  // away from under the pointer or the focus out of a field.
  var lastKey = '';
  function guard(gen, fn, stable) {
    return function (data) {
      if (gen !== generation) return;
      if (stable) {
        var key = gen + ' ' + JSON.stringify(data) + (typeof stable === 'function' ? stable() : '');
        if (key === lastKey) return;
        lastKey = key;
      }
      fn(data);
    };
  }
  function failed(gen) {
    return function (e) {
      if (gen !== generation) return;
      say(e.message || String(e), 'error');
    };
  }

  // ---- charts (canvas) ---------------------------------------------------
  function chart(canvas, series, lines, kind) {
    var dpr = window.devicePixelRatio || 1;
    var w = canvas.clientWidth || 300, h = canvas.clientHeight || 160;
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    var g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    var left = 36, right = 6, top = 8, bottom = 18;
    var pw = w - left - right, ph = h - top - bottom;
    var max = 2;
    series.forEach(function (p) { lines.forEach(function (l) { max = Math.max(max, p[l.key] || 0); }); });
    var step = Math.max(1, Math.pow(10, Math.floor(Math.log(max) / Math.LN10)));
    max = Math.ceil(max / step / 2) * step * 2;  // an even number of steps: the middle line is round too
    g.font = '11px system-ui, sans-serif';
    g.fillStyle = '#777'; g.strokeStyle = '#ddd'; g.lineWidth = 1;
    [0, 0.5, 1].forEach(function (f) {
      var y = top + ph - f * ph;
      g.beginPath(); g.moveTo(left, y + 0.5); g.lineTo(left + pw, y + 0.5); g.stroke();
      g.fillText(String(Math.round(max * f * 10) / 10), 2, y + 4);
    });
    if (!series.length) { g.fillText('no samples yet', left + 8, top + ph / 2); return; }
    var t0 = series[0].at_ms, t1 = series[series.length - 1].at_ms;
    var span = Math.max(t1 - t0, 60000);
    var x = function (t) { return left + pw - (t1 - t) / span * pw; };
    g.fillText(clock(t1 - span), left, h - 4);
    var last = clock(t1), lw = g.measureText(last).width;
    g.fillText(last, left + pw - lw, h - 4);
    var bw = Math.max(1, pw / (span / 1000) - 1);
    lines.forEach(function (l, i) {
      g.strokeStyle = l.color; g.fillStyle = l.color; g.lineWidth = 1.5;
      if (kind === 'bars') {
        series.forEach(function (p) {
          var v = p[l.key] || 0; if (!v) return;
          var bh = v / max * ph;
          g.fillRect(x(p.at_ms) - bw + (i ? bw / 2 : 0), top + ph - bh, Math.max(1, bw / 2), bh);
        });
      } else {
        g.beginPath();
        series.forEach(function (p, j) {
          var px = x(p.at_ms), py = top + ph - (p[l.key] || 0) / max * ph;
          if (j) g.lineTo(px, py); else g.moveTo(px, py);
        });
        g.stroke();
      }
    });
  }
  function legend(lines) {
    return el('div', { class: 'legend' }, lines.map(function (l) {
      return el('span', null, el('i', { style: 'background:' + l.color }), l.label);
    }));
  }

  // ---- views ---------------------------------------------------------------
  var views = {};

  // The store's health (`overview.store`): a red line while writes fail
  // (the last failure under a minute ago), an amber one after.
  var STORE_FAILING_MS = 60000;
  function storeHealth(st, now) {
    if (!st || (!st.failures && !st.refused)) return null;
    var failing = st.last_failure_ms && now - st.last_failure_ms < STORE_FAILING_MS;
    return el('p', {
      class: 'message ' + (failing ? 'error' : 'warning'), role: failing ? 'alert' : null,
      'data-testid': 'store-health', 'data-state': failing ? 'failing' : 'recovered',
      text: (failing ? 'The store is failing. ' : 'The store failed earlier. ') + 'Failed writes since start: ' +
        num(st.failures) + ', the last at ' + when(st.last_failure_ms) + '; submissions refused with ' +
        'ERROR QUEUE_ERROR: ' + num(st.refused) + '. The server log says why.'
    });
  }

  views.overview = function (gen) {
    return api('GET', API + '/overview').then(guard(gen, function (o) {
      var t = o.totals || {}, c = o.connections || {};
      var card = function (k, label) {
        return el('div', { class: 'card', 'data-testid': 'total-' + k },
          el('span', { class: 'num', 'data-testid': 'total-' + k + '-value', text: num(t[k]) }), el('span', { class: 'lbl', text: label }));
      };
      var depth = [{ key: 'queued', label: 'queued', color: '#2f6fde' }, { key: 'running', label: 'running', color: '#e08a00' }];
      var thr = [{ key: 'completed', label: 'completed/s', color: '#1e9e4a' }, { key: 'failed', label: 'failed/s', color: '#d33' }];
      var c1 = el('canvas', { class: 'chart', 'data-testid': 'chart-depth', role: 'img', 'aria-label': 'queue depth over time' });
      var c2 = el('canvas', { class: 'chart', 'data-testid': 'chart-throughput', role: 'img', 'aria-label': 'completed and failed per second' });
      replace(
        el('h1', { text: 'Overview' }),
        el('p', { class: 'sub', 'data-testid': 'server-info' },
          'Gearshift ' + (o.version || '?') + ' · up since ' + when(o.started_ms) +
          ' · connections: ' + num(c.client) + ' client, ' + num(c.worker) + ' worker, ' + num(c.admin) + ' admin'),
        storeHealth(o.store, o.now_ms || Date.now()),
        el('div', { class: 'cards', 'data-testid': 'totals' },
          card('queued', 'queued'), card('running', 'running'), card('workers', 'workers'), card('functions', 'functions'),
          card('dead', 'dead'), card('submitted', 'submitted'), card('completed', 'completed'), card('failed', 'failed'), card('retried', 'retried')),
        el('div', { class: 'charts' },
          el('figure', null, el('figcaption', { text: 'Queue depth' }), c1, legend(depth)),
          el('figure', null, el('figcaption', { text: 'Throughput per second' }), c2, legend(thr))));
      var s = o.series || [];
      chart(c1, s, depth, 'line');
      chart(c2, s, thr, 'bars');
    }));
  };
  views.overview.every = 2000;

  views.functions = function (gen) {
    return api('GET', API + '/functions').then(guard(gen, function (d) {
      var fs = (d.functions || []).slice().sort(function (a, b) { return a.name < b.name ? -1 : a.name > b.name ? 1 : 0; });
      // Partitioned nodes name each function's partition and its owner.
      var placed = fs.some(function (f) { return f.partition !== undefined; });
      var rows = fs.map(function (f) {
        var q = f.queued || {}, total = (q.high || 0) + (q.normal || 0) + (q.low || 0), n = f.name;
        var btn = f.paused
          ? el('button', { type: 'button', 'data-testid': 'resume-' + n, text: 'Resume',
              onclick: function () { act('POST', API + '/functions/' + encodeURIComponent(n) + '/resume', undefined, function () { return shown(n) + ' resumed'; }); } })
          : el('button', { type: 'button', 'data-testid': 'pause-' + n, text: 'Pause',
              onclick: function () { act('POST', API + '/functions/' + encodeURIComponent(n) + '/pause', undefined, function () { return shown(n) + ' paused'; }); } });
        return el('tr', { 'data-testid': 'function-row-' + n, class: f.paused ? 'paused' : '' },
          td(shown(n), { class: 'mono name', 'data-label': 'function' }),
          td(total, { 'data-testid': 'count-queued-' + n, 'data-label': 'queued' }),
          td(num(q.high) + '/' + num(q.normal) + '/' + num(q.low), { 'data-label': 'high/normal/low', class: 'dim' }),
          td(num(f.scheduled), { 'data-label': 'scheduled' }),
          td(num(f.running), { 'data-testid': 'count-running-' + n, 'data-label': 'running' }),
          td(num(f.workers), { 'data-testid': 'count-workers-' + n, 'data-label': 'workers' }),
          td(f.paused ? 'paused' : 'no', { 'data-testid': 'paused-' + n, 'data-label': 'paused', class: f.paused ? 'warn' : 'dim' }),
          td(num(f.submitted), { 'data-testid': 'count-submitted-' + n, 'data-label': 'submitted' }),
          td(num(f.completed), { 'data-testid': 'count-completed-' + n, 'data-label': 'completed' }),
          td(num(f.failed), { 'data-testid': 'count-failed-' + n, 'data-label': 'failed' }),
          td(num(f.dead), { 'data-testid': 'count-dead-' + n, 'data-label': 'dead' }),
          placed ? td((f.node === null ? 'no owner now' : shown(f.node)) + ' (' + f.partition + ')',
            { class: 'mono', 'data-testid': 'node-of-' + n, 'data-label': 'node (partition)' }) : null,
          tdLabel('', btn));
      });
      replace(el('h1', { text: 'Functions' }),
        fs.length ? table('cards-sm', ['function', 'queued', 'high/norm/low', 'scheduled', 'running', 'workers', 'paused',
          'submitted', 'completed', 'failed', 'dead'].concat(placed ? ['node (partition)'] : [], ['']), rows)
          : el('p', { class: 'empty', 'data-testid': 'functions-empty', text: 'No functions yet: submit a job or connect a worker.' }));
    }, true));
  };
  views.functions.every = 5000;

  views.workers = function (gen) {
    return api('GET', API + '/workers').then(guard(gen, function (d) {
      var ws = d.workers || [];
      var rows = ws.map(function (w) {
        var running = (w.running || []).map(function (h) { return el('div', null, jobLink(h)); });
        return el('tr', { 'data-testid': 'worker-row-' + w.id },
          td(w.client_id && w.client_id !== '-' ? shown(w.client_id) : (w.identity || '–'),
            { class: 'mono', 'data-label': 'client id', title: w.identity ? 'TLS certificate: ' + w.identity : '' }),
          td(w.address, { class: 'mono', 'data-label': 'address' }),
          td(ago(w.connected_ms), { 'data-label': 'connected', title: clock(w.connected_ms) }),
          td(ago(w.last_seen_ms), { 'data-label': 'last seen', title: clock(w.last_seen_ms) }),
          td(num(w.jobs_done) + ' / ' + num(w.jobs_failed), { 'data-label': 'done / failed' }),
          tdLabel('running', running.length ? running : el('span', { class: 'dim', text: 'idle' })),
          td((w.functions || []).map(shown).join(', '), { class: 'mono', 'data-label': 'functions' }));
      });
      replace(el('h1', { text: 'Workers' }),
        ws.length ? table('cards-sm', ['client id', 'address', 'connected', 'last seen', 'done / failed', 'running', 'functions'], rows)
          : el('p', { class: 'empty', 'data-testid': 'workers-empty', text: 'No workers connected.' }));
    }));
  };
  views.workers.every = 5000;

  function deadQuery(extra) {
    var q = [];
    if (dead.fn) q.push('function=' + encodeURIComponent(dead.fn));
    if (extra) q.push(extra);
    return q.length ? '?' + q.join('&') : '';
  }
  function selectedHandles() { return Object.keys(dead.selected).filter(function (h) { return dead.selected[h]; }); }
  views.dead = function (gen) {
    var cursor = dead.cursors[dead.cursors.length - 1];
    var qs = deadQuery('limit=50' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
    return api('GET', API + '/dead' + qs).then(guard(gen, function (d) {
      var items = d.dead || [];
      var onPage = {};
      items.forEach(function (j) { onPage[j.handle] = 1; });
      Object.keys(dead.selected).forEach(function (h) { if (!onPage[h]) delete dead.selected[h]; });
      var scope = dead.fn ? 'of ' + dead.fn : '';
      var filter = el('input', { type: 'search', id: 'dead-filter', 'data-testid': 'dead-filter', placeholder: 'function', value: dead.fn });
      var applyFilter = function (ev) {
        ev.preventDefault();
        dead.fn = filter.value.trim(); dead.cursors = ['']; dead.selected = {};
        refreshSoon(0);
      };
      var all = el('input', { type: 'checkbox', 'data-testid': 'dead-select-all', 'aria-label': 'select all on this page',
        onchange: function () { items.forEach(function (j) { dead.selected[j.handle] = all.checked; }); refreshSoon(0); } });
      all.checked = items.length > 0 && items.every(function (j) { return dead.selected[j.handle]; });
      var sel = selectedHandles();
      var rows = items.map(function (j) {
        var h = j.handle, enc = encodeURIComponent(h);
        var box = el('input', { type: 'checkbox', 'data-testid': 'dead-check-' + h, 'aria-label': 'select ' + h,
          onchange: function () { dead.selected[h] = box.checked; refreshSoon(0); } });
        box.checked = !!dead.selected[h];
        return el('tr', { 'data-testid': 'dead-row-' + h },
          tdLabel('', box, { class: 'check' }),
          tdLabel('handle', jobLink(h)),
          td(shown(j.function), { class: 'mono', 'data-label': 'function' }),
          td(num(j.attempts), { 'data-label': 'attempts' }),
          td(when(j.died_ms), { 'data-label': 'died' }),
          td(j.error || '–', { class: 'err', 'data-label': 'error' }),
          td(bytes(j.size), { 'data-label': 'size' }),
          tdLabel('', [
            el('button', { type: 'button', 'data-testid': 'retry-' + h, text: 'Retry',
              onclick: function () { act('POST', API + '/dead/' + enc + '/retry', undefined, function () { return 'Retried ' + h; }); } }),
            ' ',
            el('button', { type: 'button', class: 'danger', 'data-testid': 'drop-' + h, text: 'Drop',
              onclick: function () { act('DELETE', API + '/dead/' + enc, undefined, function () { return 'Dropped ' + h; }); } })
          ], { class: 'actions' }));
      });
      var bulk = function (label, testid, cls, handler, disabled) {
        return el('button', { type: 'button', class: cls, 'data-testid': testid, text: label, disabled: disabled, onclick: handler });
      };
      replace(
        el('h1', { text: 'Dead jobs' }),
        el('form', { class: 'toolbar', onsubmit: applyFilter },
          el('label', { for: 'dead-filter', text: 'Function ' }), filter,
          el('button', { type: 'submit', text: 'Filter' }),
          dead.fn ? el('button', { type: 'button', text: 'Clear', onclick: function () { filter.value = ''; applyFilter({ preventDefault: function () {} }); } }) : null),
        el('div', { class: 'toolbar' },
          bulk('Retry selected (' + sel.length + ')', 'retry-selected', '', function () {
            act('POST', API + '/dead/retry', { handles: sel }, function (r) { dead.selected = {}; return 'Retried ' + num(r.retried); });
          }, !sel.length),
          bulk('Drop selected (' + sel.length + ')', 'drop-selected', 'danger', function () {
            if (!window.confirm('Drop ' + sel.length + ' dead job(s)? This cannot be undone.')) return;
            act('DELETE', API + '/dead', { handles: sel }, function (r) { dead.selected = {}; return 'Dropped ' + num(r.dropped); });
          }, !sel.length),
          bulk('Retry all ' + scope, 'retry-all', '', function () {
            if (!window.confirm('Retry every dead job ' + (scope || '(all functions)') + '?')) return;
            act('POST', API + '/dead/retry', dead.fn ? { function: dead.fn } : {}, function (r) { return 'Retried ' + num(r.retried); });
          }, !items.length),
          bulk('Drop all ' + scope, 'drop-all', 'danger', function () {
            if (!window.confirm('Drop every dead job ' + (scope || '(all functions)') + '? This cannot be undone.')) return;
            act('DELETE', API + '/dead' + deadQuery(), undefined, function (r) { return 'Dropped ' + num(r.dropped); });
          }, !items.length)),
        items.length
          ? table('cards-sm dead', [el('span', null, all), 'handle', 'function', 'attempts', 'died', 'error', 'size', ''], rows)
          : el('p', { class: 'empty', 'data-testid': 'dead-empty', text: dead.fn ? 'No dead jobs of ' + dead.fn + '.' : 'No dead jobs.' }),
        el('div', { class: 'pager' },
          el('button', { type: 'button', 'data-testid': 'dead-first', text: 'First page', disabled: dead.cursors.length < 2,
            onclick: function () { dead.cursors = ['']; refreshSoon(0); } }),
          el('button', { type: 'button', 'data-testid': 'dead-prev', text: 'Previous', disabled: dead.cursors.length < 2,
            onclick: function () { dead.cursors.pop(); refreshSoon(0); } }),
          el('span', { class: 'dim', text: 'page ' + dead.cursors.length }),
          el('button', { type: 'button', 'data-testid': 'dead-next', text: 'Next page', disabled: !d.next_cursor,
            onclick: function () { dead.cursors.push(d.next_cursor); refreshSoon(0); } })));
    }, function () { return JSON.stringify(dead) + Math.floor(Date.now() / 60000); }));
  };
  views.dead.every = 5000;

  // Recurring schedules, then epoch jobs (submitted with a time to run at)
  // waiting for it, soonest first; an epoch job's handle opens its job page.
  views.schedules = function (gen) {
    return api('GET', API + '/schedules').then(guard(gen, function (d) {
      var ss = d.schedules || [];
      var epochs = ss.filter(function (s) { return s.kind === 'epoch'; }).length;
      var rows = ss.map(function (s) {
        var h = s.handle || String(s.id);
        return el('tr', { 'data-testid': 'schedule-row-' + h, 'data-kind': s.kind || 'recurring' },
          tdLabel('handle', s.kind === 'epoch' ? jobLink(h) : el('span', { class: 'mono', text: h })),
          td(shown(s.function), { class: 'mono', 'data-label': 'function' }),
          td(s.kind === 'epoch' ? 'once (epoch job)' : s.when, { class: 'mono', 'data-label': 'when' }),
          td(when(s.next_ms), { 'data-testid': 'schedule-next-' + h, 'data-label': 'next run' }),
          td(s.source, { 'data-label': 'source' }),
          td(s.unique || '–', { class: 'mono', 'data-label': 'unique' }),
          td(s.priority, { 'data-label': 'priority' }));
      });
      var more = (d.epoch_total || 0) - epochs;
      replace(el('h1', { text: 'Schedules' }),
        ss.length ? table('cards-sm', ['handle', 'function', 'when', 'next run', 'source', 'unique', 'priority'], rows)
          : el('p', { class: 'empty', 'data-testid': 'schedules-empty', text: 'No schedules and no epoch jobs waiting for their time.' }),
        more > 0 ? el('p', { class: 'dim', 'data-testid': 'schedules-more', text: more + ' more epoch jobs wait (the soonest are listed).' }) : null);
    }, true));
  };
  views.schedules.every = 10000;

  // Partition numbers as runs: [0,1,2,5] -> "0-2, 5".
  function runs(ns) {
    var out = [];
    for (var i = 0; i < ns.length; i++) {
      var j = i;
      while (j + 1 < ns.length && ns[j + 1] === ns[j] + 1) j++;
      out.push(i === j ? String(ns[i]) : ns[i] + '-' + ns[j]);
      i = j;
    }
    return out.join(', ');
  }
  // A cluster node's view of the nodes: roles or partitions, heartbeats,
  // workers. Its nav link shows only where /cluster answers (a PostgreSQL node).
  views.cluster = function (gen) {
    return api('GET', API + '/cluster').then(guard(gen, function (c) {
      var partitioned = c.mode === 'partitioned';
      var owned = {};
      (c.partitions || []).forEach(function (p) {
        var n = p.node === null || p.node === undefined ? '' : p.node;
        (owned[n] = owned[n] || []).push(p.partition);
      });
      Object.keys(owned).forEach(function (n) { owned[n].sort(function (a, b) { return a - b; }); });
      var rows = (c.nodes || []).map(function (n) {
        var mine = owned[n.name] || [];
        return el('tr', { 'data-testid': 'node-row-' + n.name },
          td(shown(n.name) + (n.name === c.node ? ' (this node)' : ''), { class: 'mono', 'data-label': 'node' }),
          td(partitioned ? mine.length + ' (' + (runs(mine) || 'none') + ')' : n.leader ? 'leader' : 'follower',
            { 'data-testid': 'node-role-' + n.name, 'data-label': partitioned ? 'partitions' : 'role' }),
          td(n.gearman, { class: 'mono', 'data-label': 'gearman' }),
          td(n.http || '–', { class: 'mono', 'data-label': 'http' }),
          td(n.version, { 'data-label': 'version' }),
          td((n.silent_ms / 1000).toFixed(1) + ' s ago', { 'data-label': 'last heartbeat' }),
          td(num(n.workers), { 'data-testid': 'node-workers-' + n.name, 'data-label': 'workers' }));
      });
      var unowned = (owned[''] || []).length;
      var pins = (c.pins || []).map(function (p) {
        return el('tr', { 'data-testid': 'pin-row-' + p.function },
          td(shown(p.function), { class: 'mono', 'data-label': 'function' }),
          td(String(p.partition), { 'data-label': 'partition' }),
          td(p.node === null || p.node === undefined ? 'no owner now' : shown(p.node), { class: 'mono', 'data-label': 'node' }));
      });
      var asked = (c.pins_asked || []).map(function (p) {
        return el('tr', { 'data-testid': 'pin-asked-row-' + p.function },
          td(shown(p.function), { class: 'mono', 'data-label': 'function' }),
          td(String(p.from), { 'data-label': 'lives in' }),
          td(p.partition === null || p.partition === undefined ? 'unpinned' : String(p.partition), { 'data-label': 'asked' }),
          td(p.node === null || p.node === undefined ? 'no owner now' : shown(p.node), { class: 'mono', 'data-label': 'moved by' }));
      });
      replace(el('h1', { text: 'Cluster' }),
        el('p', { 'data-testid': 'cluster-mode', text: partitioned
          ? 'Partitioned: each node serves the jobs of the partitions it owns; ' + (c.partitions || []).length + ' partitions.'
          : 'One leader serves every job; the other nodes carry their connections to it.' }),
        table('cards-sm', ['node', partitioned ? 'partitions' : 'role', 'gearman', 'http', 'version', 'last heartbeat', 'workers'], rows),
        unowned ? el('p', { class: 'warn', 'data-testid': 'cluster-unowned',
          text: unowned + ' partitions have no owner now (' + runs(owned['']) + '): the live nodes take them over within --node-timeout.' }) : null,
        pins.length ? [el('h2', { text: 'Functions placed by hand (gearshift pin)' }),
          el('div', { 'data-testid': 'pins' }, table('cards-sm', ['function', 'partition', 'node'], pins))] : null,
        asked.length ? [el('h2', { text: 'Pins asked for: moved once the function\'s running jobs are done' }),
          el('div', { 'data-testid': 'pins-asked' }, table('cards-sm', ['function', 'lives in', 'asked', 'moved by'], asked))] : null);
    }));
  };
  views.cluster.every = 5000;

  views.job = function (gen) {
    var h = route.arg, enc = encodeURIComponent(h);
    return api('GET', API + '/jobs/' + enc + '?result=1').then(guard(gen, function (j) {
      var field = function (k, v, testid) { return [el('dt', { text: k }), el('dd', { 'data-testid': testid || null, text: v })]; };
      var p = j.progress;
      var actions = [];
      if (LIVE_STATES[j.state]) {
        actions.push(el('button', { type: 'button', class: 'danger', 'data-testid': 'cancel-job', text: 'Cancel',
          onclick: function () {
            if (!window.confirm('Cancel job ' + h + '?')) return;
            act('POST', API + '/jobs/' + enc + '/cancel', undefined, function () { return 'Cancelled ' + h; });
          } }));
      }
      if (j.state === 'dead') {
        actions.push(el('button', { type: 'button', 'data-testid': 'retry-job', text: 'Retry',
          onclick: function () { act('POST', API + '/dead/' + enc + '/retry', undefined, function () { return 'Retried ' + h; }); } }));
      }
      var history = (j.history || []).map(function (ev, i, all) {
        var delta = i ? '+' + ((ev.at_ms - all[i - 1].at_ms) / 1000).toFixed(3) + 's' : '';
        return el('li', { class: 'ev-' + ev.event, 'data-testid': 'history-item' },
          el('time', { text: clock(ev.at_ms) }), el('span', { class: 'dim', text: ' ' + delta }),
          el('div', null, el('b', { text: ev.event }), ev.detail ? el('span', { class: 'detail', text: ' ' + ev.detail }) : null));
      });
      var result = null;
      if (typeof j.result === 'string') result = [el('h2', { text: 'Result (text)' }), el('pre', { 'data-testid': 'job-result', text: j.result })];
      else if (typeof j.result_base64 === 'string') result = [el('h2', { text: 'Result (base64, not UTF-8)' }), el('pre', { 'data-testid': 'job-result', class: 'b64', text: j.result_base64 })];
      replace(
        el('h1', null, 'Job ', el('span', { class: 'mono', 'data-testid': 'job-handle', text: j.handle })),
        el('p', null, el('span', { class: 'state st-' + j.state, 'data-testid': 'job-state', text: j.state }), ' ', actions),
        el('dl', { class: 'fields', 'data-testid': 'job-fields' },
          field('function', shown(j.function), 'job-function'), field('unique', j.unique || '–'), field('priority', j.priority),
          field('background', j.background ? 'yes' : 'no'), field('attempts', num(j.attempts), 'job-attempts'),
          field('created', when(j.created_ms)), field('started', when(j.started_ms)), field('finished', when(j.finished_ms)),
          field('due', when(j.due_ms)), field('worker', j.worker || '–'),
          field('outcome', j.outcome || (LIVE_STATES[j.state] ? 'not ended yet' : '–'), 'job-outcome'),
          field('last failure', lastFailure(j.last_failure), 'job-last-failure'),
          field('result size', bytes(j.result_size))),
        p ? el('div', { class: 'progress', 'data-testid': 'job-progress' },
          el('progress', { max: p.denominator || 1, value: p.numerator || 0 }), ' ' + p.numerator + ' / ' + p.denominator) : null,
        el('h2', { text: 'History' }),
        history.length ? el('ol', { class: 'timeline', 'data-testid': 'job-history' }, history)
          : el('p', { class: 'empty', 'data-testid': 'job-history-empty', text: 'No history: it is kept for jobs under a policy (docs/config.md).' }),
        result);
    }), function (e) {
      if (gen !== generation) return;
      if (e.status === 404) {
        replace(el('h1', null, 'Job ', el('span', { class: 'mono', text: h })),
          el('p', { class: 'empty', 'data-testid': 'job-missing', text: 'No such job: it finished and its result was not kept, or it never existed.' }));
      } else throw e;
    });
  };
  views.job.every = 3000;

  // ---- routing and refresh ---------------------------------------------------
  var inflight = false, pending = false, soonTimer = null;
  function refresh() {
    if (inflight) { pending = true; return; }
    var v = views[route.name];
    if (!v) return;
    inflight = true;
    var gen = generation;
    Promise.resolve().then(function () { return v(gen); }).catch(failed(gen)).then(function () {
      inflight = false;
      if (pending) { pending = false; refreshSoon(0); }
    });
  }
  // Debounced: many events in a burst cause one refresh at most every 400 ms.
  function refreshSoon(delay) {
    if (soonTimer) { if (delay !== 0) return; clearTimeout(soonTimer); }
    soonTimer = setTimeout(function () { soonTimer = null; refresh(); }, delay === undefined ? 400 : delay);
  }
  function parseRoute() {
    var hsh = location.hash.replace(/^#\/?/, '');
    var m = /^job\/(.+)$/.exec(hsh);
    if (m) { var arg; try { arg = decodeURIComponent(m[1]); } catch (e) { arg = m[1]; } return { name: 'job', arg: arg }; }
    return { name: views[hsh] && hsh !== 'job' ? hsh : 'overview', arg: '' };
  }
  function go() {
    route = parseRoute();
    generation++;
    inflight = false; pending = false;
    clearInterval(timer);
    Array.prototype.forEach.call(document.querySelectorAll('nav a'), function (a) {
      a.classList.toggle('active', a.getAttribute('data-route') === route.name);
    });
    document.getElementById('nav').classList.remove('open');
    document.getElementById('nav-toggle').setAttribute('aria-expanded', 'false');
    document.body.setAttribute('data-view', route.name);
    var m = document.getElementById('message');
    if (!/error/.test(m.className)) m.hidden = true;
    clear(view); add(view, el('p', { class: 'dim', text: 'Loading…' }));
    refresh();
    timer = setInterval(function () {
      var a = document.activeElement;
      if (document.hidden || (a && a.tagName === 'INPUT' && a.type !== 'checkbox' && view.contains(a))) return;
      refresh();
    }, views[route.name].every);
  }
  window.addEventListener('hashchange', go);
  window.addEventListener('resize', function () { if (route.name === 'overview') refreshSoon(); });
  document.getElementById('nav-toggle').addEventListener('click', function () {
    var open = document.getElementById('nav').classList.toggle('open');
    this.setAttribute('aria-expanded', open ? 'true' : 'false');
  });

  // ---- live events ---------------------------------------------------------
  // By default the stream carries only the notable kinds and `stats`, the
  // server's per-second totals: an open dashboard then costs the job path
  // nothing. The "every job event" box asks for the full stream (no `kinds`),
  // which makes the server build an event for every job transition.
  var MAX_EVENTS = 50;
  var ALL_KEY = 'gearshift.allEvents';
  var NOTABLE = ['failed', 'retrying', 'dead', 'cancelled', 'revived', 'worker_joined', 'worker_left'];
  var KINDS = ['created', 'started', 'progress', 'completed', 'failed', 'retrying', 'requeued', 'dead',
    'cancelled', 'revived', 'worker_joined', 'worker_left', 'stats', 'dropped'];
  // The totals whose change makes the page in view refresh.
  var WATCHED = ['queued', 'running', 'submitted', 'completed', 'failed', 'dead', 'workers'];
  var AFFECTS = {
    overview: function () { return true; },
    functions: function () { return true; },
    workers: function (e) { return e.kind !== 'created'; },
    dead: function (e) { return e.kind === 'dead' || e.kind === 'revived'; },
    schedules: function (e) { return e.kind === 'created' || e.kind === 'started'; },
    job: function (e) { return e.handle === route.arg; }
  };
  var source = null, backoff = 1000, reconnectTimer = null, lastStats = null, staleHidden = false;
  var allBox = document.getElementById('feed-all');
  function wantAll() { try { return localStorage.getItem(ALL_KEY) === '1'; } catch (e) { return false; } }
  function setWantAll(on) {
    try { if (on) localStorage.setItem(ALL_KEY, '1'); else localStorage.removeItem(ALL_KEY); } catch (e) { /* private mode */ }
  }
  function eventsUrl() {
    return API + '/events' + (wantAll() ? '' : '?kinds=' + NOTABLE.concat(['stats']).join(','));
  }
  function live(text, cls) { var l = document.getElementById('live'); l.textContent = text; l.className = 'live ' + cls; }
  function showEvent(e) {
    var li = el('li', { class: 'ev k-' + e.kind, 'data-testid': 'event', 'data-kind': e.kind },
      el('time', { text: clock(e.at_ms || Date.now()) }), ' ',
      el('b', { text: e.kind }), ' ');
    if (e.kind === 'dropped') {
      add(li, el('span', { class: 'dropped', text: 'The server dropped this stream (we fell behind): ' + (e.reason || '') + '. Reconnecting; some events were missed.' }));
    } else if (e.worker !== undefined || e.kind === 'worker_joined' || e.kind === 'worker_left') {
      add(li, [el('span', { class: 'mono', text: shown(e.worker) }), ' ', el('span', { class: 'dim', text: (e.address || '') + ' ' + (e.functions || []).map(shown).join(', ') })]);
    } else {
      add(li, [el('span', { class: 'mono fn', text: shown(e.function) }), ' ', e.handle ? jobLink(e.handle) : null]);
      var detail = e.kind === 'progress' ? e.numerator + '/' + e.denominator
        : e.kind === 'retrying' && e.retry_at_ms ? 'retry at ' + clock(e.retry_at_ms) : e.detail;
      if (detail) add(li, [' ', el('span', { class: 'dim', text: String(detail) })]);
    }
    feed.insertBefore(li, feed.firstChild);
    while (feed.children.length > MAX_EVENTS) feed.removeChild(feed.lastChild);
  }
  // A refresh driven by the stream; a hidden page catches up when shown.
  function liveRefresh() {
    if (document.hidden) { staleHidden = true; return; }
    refreshSoon();
  }
  document.addEventListener('visibilitychange', function () {
    if (!document.hidden && staleHidden) { staleHidden = false; refreshSoon(0); }
  });
  // The overview's cards and connections line, updated in place.
  function showStats(s) {
    if (route.name !== 'overview') return;
    var t = s.totals || {}, c = s.connections || {};
    Object.keys(t).forEach(function (k) {
      var n = view.querySelector('[data-testid="total-' + k + '-value"]');
      if (n) n.textContent = num(t[k]);
    });
    var info = view.querySelector('[data-testid="server-info"]');
    if (info && s.connections) {
      info.textContent = info.textContent.replace(/connections: .*$/,
        'connections: ' + num(c.client) + ' client, ' + num(c.worker) + ' worker, ' + num(c.admin) + ' admin');
    }
  }
  function onStats(s) {
    var t = s.totals || {};
    var changed = !lastStats || WATCHED.some(function (k) { return t[k] !== lastStats[k]; });
    lastStats = t;
    window.__gearshiftStats = { count: ((window.__gearshiftStats || {}).count || 0) + 1, last: s };
    showStats(s);
    if (changed) liveRefresh();
  }
  function onEvent(ev) {
    var e;
    try { e = JSON.parse(ev.data); } catch (x) { return; }
    if (!e.kind) e.kind = ev.type;
    if (e.kind === 'stats') { onStats(e); return; }
    showEvent(e);
    if (e.kind === 'dropped') { live('dropped', 'bad'); reconnect(); return; }
    var f = AFFECTS[route.name];
    if (f && f(e)) liveRefresh();
  }
  function connect() {
    if (!window.EventSource) { live('no live events', 'off'); return; }
    var url = eventsUrl();
    window.__gearshiftEventsUrl = url;  // for the tests: what the page subscribed to
    lastStats = null;
    source = new EventSource(url);
    source.onopen = function () { backoff = 1000; live('live', 'on'); refreshSoon(0); };
    source.onmessage = onEvent;
    KINDS.forEach(function (k) { source.addEventListener(k, onEvent); });
    source.onerror = function () { live('reconnecting…', 'bad'); reconnect(); };
  }
  function reconnect() {
    if (source) { source.close(); source = null; }
    clearTimeout(reconnectTimer);
    reconnectTimer = setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 15000);
  }
  document.getElementById('feed-clear').addEventListener('click', function () { clear(feed); });
  allBox.checked = wantAll();
  allBox.addEventListener('change', function () {
    setWantAll(allBox.checked);
    if (source) { source.close(); source = null; }
    clearTimeout(reconnectTimer);
    backoff = 1000;
    live('connecting…', 'off');
    connect();
  });

  go();
  // The Cluster view is offered on cluster nodes only.
  api('GET', API + '/cluster').then(function () {
    document.querySelector('[data-testid="nav-cluster"]').hidden = false;
  }, function () {});
  connect();
})();
