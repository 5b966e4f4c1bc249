import { describe, expect, it } from 'vitest';
import { sanitiseEventHtml } from '../../gateway/routes/events.route.js';

describe('event HTML sanitiser', () => {
  it('keeps text formatting styles', () => {
    const html =
      '<p style="color: #c00; background-color: rgb(255, 255, 0); font-weight: bold; font-style: italic; text-align: center; text-decoration: underline">Hi</p>';
    const clean = sanitiseEventHtml(html);
    for (const kept of [
      'color:#c00',
      'background-color:rgb(255, 255, 0)',
      'font-weight:bold',
      'font-style:italic',
      'text-align:center',
      'text-decoration:underline',
    ]) {
      expect(clean).toContain(kept);
    }
  });

  it.each([
    [
      'a full-screen overlay',
      '<div style="position: fixed; top: 0; left: 0; width: 100vw; height: 100vh; z-index: 99999">Log in again</div>',
    ],
    ['a background image', '<span style="background-image: url(https://evil.test/x.png)">x</span>'],
    ['a colour that loads something', '<span style="color: url(https://evil.test/x)">x</span>'],
    ['an expression', '<span style="color: expression(alert(1))">x</span>'],
  ])('drops %s', (_label, html) => {
    const clean = sanitiseEventHtml(html);
    expect(clean).not.toMatch(/position|fixed|z-index|width|height|url\(|expression/);
  });

  it.each([
    ['a data: link', '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">open</a>', 'data:'],
    ['a data: image', '<img src="data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=">', 'data:'],
    ['a javascript: link', '<a href="javascript:alert(1)">x</a>', 'javascript'],
    ['a mixed-case javascript: link', '<a href="JaVaScRiPt:alert(1)">x</a>', 'alert'],
    ['a vbscript: link', '<a href="vbscript:msgbox(1)">x</a>', 'vbscript'],
    ['a file: link', '<a href="file:///etc/passwd">x</a>', 'file:'],
  ])('drops %s', (_label, html, forbidden) => {
    expect(sanitiseEventHtml(html).toLowerCase()).not.toContain(forbidden.toLowerCase());
  });

  it('keeps http and https links and images', () => {
    const clean = sanitiseEventHtml(
      '<a href="https://example.test/a">a</a><a href="http://example.test/b">b</a><img src="https://example.test/c.png">',
    );
    expect(clean).toContain('href="https://example.test/a"');
    expect(clean).toContain('href="http://example.test/b"');
    expect(clean).toContain('src="https://example.test/c.png"');
  });
});
