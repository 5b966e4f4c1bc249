const root = document.getElementById('root');
const tokenInput = document.getElementById('token');
const el = (tag, attributes = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
};
const schemaText = (schema) => JSON.stringify(schema, null, 2);

function operationView(path, method, operation) {
  const upper = method.toUpperCase();
  const details = el('details');
  details.append(
    el(
      'summary',
      {},
      el('span', { class: `method ${upper}` }, upper),
      el('span', { class: 'path' }, path),
      el('span', { class: 'summary' }, operation.summary || ''),
    ),
  );
  const body = el('div', { class: 'body' });
  const parameters = operation.parameters || [];
  const inputs = {};
  if (parameters.length) {
    const table = el(
      'table',
      {},
      el('tr', {}, el('th', {}, 'parameter'), el('th', {}, 'in'), el('th', {}, 'required'), el('th', {}, 'value')),
    );
    for (const parameter of parameters) {
      const input = el('input', { 'aria-label': `${parameter.name} (${parameter.in})` });
      inputs[`${parameter.in}:${parameter.name}`] = input;
      table.append(
        el(
          'tr',
          {},
          el('td', {}, parameter.name + (parameter.description ? ` — ${parameter.description}` : '')),
          el('td', {}, parameter.in),
          el('td', {}, parameter.required ? 'yes' : ''),
          el('td', { class: 'try' }, input),
        ),
      );
    }
    body.append(table);
  }
  let bodyInput;
  const security = operation.security || [];
  body.append(
    el(
      'p',
      {},
      `Credentials: ${security.length ? security.map((requirement) => Object.keys(requirement).join(' + ')).join(', or ') : 'none'}`,
    ),
  );
  if (operation.requestBody) {
    const [mediaType, { schema }] = Object.entries(operation.requestBody.content)[0];
    body.append(el('p', {}, `Request body (${mediaType}):`));
    bodyInput = el('textarea', { 'aria-label': 'request body' });
    body.append(bodyInput, el('details', {}, el('summary', {}, 'request schema'), el('pre', {}, schemaText(schema))));
  }
  for (const [status, response] of Object.entries(operation.responses || {})) {
    const media = Object.entries(response.content || {});
    const shown = media.length === 0 ? '(no body)' : media.map(([type, entry]) => `${type}\n${schemaText(entry.schema)}`).join('\n\n');
    body.append(el('details', {}, el('summary', {}, `response ${status}: ${response.description}`), el('pre', {}, shown)));
  }
  const output = el('pre', { 'aria-live': 'polite' });
  const button = el('button', { type: 'button' }, 'Send');
  button.addEventListener('click', async () => {
    let url = path;
    const query = new URLSearchParams();
    for (const [key, input] of Object.entries(inputs)) {
      const [where, name] = key.split(':');
      if (!input.value) continue;
      if (where === 'path') url = url.replace(`{${name}}`, encodeURIComponent(input.value));
      else if (where === 'query') query.append(name, input.value);
    }
    const headers = { 'content-type': 'application/json' };
    if (tokenInput.value) headers.authorization = `Bearer ${tokenInput.value.trim()}`;
    output.textContent = '…';
    try {
      const response = await fetch(url + (query.toString() ? `?${query}` : ''), {
        method: upper,
        headers,
        body: bodyInput?.value ? bodyInput.value : undefined,
      });
      const text = await response.text();
      let shown = text;
      try {
        shown = JSON.stringify(JSON.parse(text), null, 2);
      } catch {
        /* not JSON */
      }
      output.textContent = `${response.status} ${response.statusText}\n\n${shown}`;
    } catch (error) {
      output.textContent = String(error);
    }
  });
  body.append(button, output);
  details.append(body);
  return details;
}

fetch('/api/v1/openapi.json')
  .then((response) => response.json())
  .then((document) => {
    root.textContent = '';
    root.append(el('p', {}, document.info.description || ''));
    const links = el('p', {}, 'Machine-readable: ');
    links.append(
      el('a', { href: '/api/v1/openapi.json' }, 'OpenAPI 3.1 (REST)'),
      ' · ',
      el('a', { href: '/api/v1/asyncapi.json' }, 'AsyncAPI 3.0 (WebSocket frames)'),
    );
    root.append(links);
    const byTag = new Map();
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const tag = operation.tags?.[0] || 'other';
        if (!byTag.has(tag)) byTag.set(tag, []);
        byTag.get(tag).push(operationView(path, method, operation));
      }
    }
    for (const [tag, views] of byTag) root.append(el('h2', {}, tag), ...views);
  })
  .catch((error) => {
    root.textContent = `Could not load the OpenAPI document: ${error}`;
  });
