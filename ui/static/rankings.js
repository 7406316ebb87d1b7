// rankings.js: the Rankings screen (docs/RANKINGS.md). Loaded after
// app.js, whose helpers (h, api, every, show, errorLine, fmtInt, fmtDate,
// escapeID) it uses; app.js's router calls rankingsScreen.

const RANKING_POLL_MS = 1000;
const RANKING_K = 20;

// Which rankings are there, and what is at the top of each? Every
// ranking's first entries, polled once a second.
function rankingsScreen(name, signal) {
  const body = h('div', {}, h('p', { class: 'note', text: 'Loading…' }));
  show(name ? `Ranking ${name}` : 'Rankings', h('h1', { text: name ? `Ranking ${name}` : 'Rankings' }), body);
  if (name) return rankingScreen(name, body, signal);
  every(RANKING_POLL_MS * 5, signal, async () => {
    let list;
    try {
      list = await api('GET', '/v1/rankings', undefined, signal);
    } catch (e) {
      body.replaceChildren(errorLine(e));
      return;
    }
    if (list.rankings.length === 0) {
      body.replaceChildren(h('p', { class: 'note', 'data-testid': 'no-rankings', text: 'No rankings yet: create one with PUT /v1/rankings/{name} or shardcounter rank create NAME --prefix P.' }));
      return;
    }
    body.replaceChildren(h('table', { 'data-testid': 'rankings' },
      h('thead', {}, h('tr', {}, h('th', { text: 'Name' }), h('th', { text: 'Prefix' }), h('th', { text: 'By' }),
        h('th', { class: 'num', text: 'Size' }), h('th', { text: 'Max staleness' }))),
      h('tbody', {}, list.rankings.map((r) => h('tr', {},
        h('td', { class: 'id' }, h('a', { href: '#/rankings/' + encodeURIComponent(r.name), text: r.name })),
        h('td', { class: 'id', text: r.prefix }), h('td', { text: r.last ? `sum of the last ${r.last}` : 'value' }),
        h('td', { class: 'num', text: fmtInt(r.size) }), h('td', { text: r.max_staleness }))))));
  });
}

// rankingScreen shows one ranking's top entries, live: each poll reads
// GET /v1/rankings/{name}?k=20 and marks the entries that moved.
function rankingScreen(name, body, signal) {
  let before = new Map(); // id → [rank, value] of the previous poll
  every(RANKING_POLL_MS, signal, async () => {
    let top;
    try {
      top = await api('GET', `/v1/rankings/${escapeID(name)}?k=${RANKING_K}`, undefined, signal);
    } catch (e) {
      body.replaceChildren(errorLine(e));
      return;
    }
    const now = new Map(top.entries.map((e, i) => [e.id, [i, e.value]]));
    const moved = (e, i) => {
      const b = before.get(e.id);
      if (!b) return before.size ? 'new' : '';
      if (b[0] > i) return 'up';
      if (b[0] < i) return 'down';
      return b[1] !== e.value ? 'changed' : '';
    };
    body.replaceChildren(
      h('div', { class: 'meta' },
        h('span', {}, 'counters ', h('b', { text: top.prefix + '*' })),
        h('span', {}, 'by ', h('b', { text: top.last ? `sum of the last ${top.last}` : 'value' })),
        h('span', {}, 'ranked ', h('b', { 'data-testid': 'ranked', text: fmtInt(top.counters) })),
        h('span', {}, 'as of ', h('b', { 'data-testid': 'as-of', text: fmtDate(top.as_of) })),
        h('span', {}, 'at most ', h('b', { text: top.max_staleness }), ' stale')),
      top.note ? h('p', { class: 'note', text: top.note }) : '',
      h('table', { 'data-testid': 'top' },
        h('thead', {}, h('tr', {}, h('th', { class: 'num', text: '#' }), h('th', { text: 'Counter' }), h('th', { class: 'num', text: 'Value' }), h('th', { text: '' }))),
        h('tbody', {}, top.entries.map((e, i) => h('tr', { 'data-id': e.id },
          h('td', { class: 'num', text: i + 1 }),
          h('td', { class: 'id' }, h('a', { href: '#/counter/' + encodeURIComponent(e.id), text: e.id })),
          h('td', { class: 'num value', text: fmtInt(e.value) }),
          h('td', { class: 'moved', text: { up: '▲', down: '▼', new: 'new', changed: '•' }[moved(e, i)] || '' }))))));
    before = now;
  });
}
