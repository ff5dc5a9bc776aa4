// Model text to safe HTML. (Exports are the server's: `GET /sessions/{id}/export` scrubs them.)
//
// Safety rule: every character of model text is HTML-escaped first; only then are a few
// Markdown constructs turned into tags this file writes itself. No attribute ever carries
// model text except an http(s) link target, which is escaped and checked. Nothing here
// evaluates, imports or injects script.

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for use in HTML text and double- or single-quoted attributes. */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

const HOLE = '\u0000';

/** Renders a small, safe Markdown subset: headings, paragraphs, lists, quotes, fenced code,
 *  tables, rules, inline code, bold, italic, strikethrough and http(s) links. */
export function renderMarkdown(source) {
  const text = String(source ?? '').replace(/\u0000/g, '').replace(/\r\n?/g, '\n');
  const lines = text.split('\n');
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+#.-]*)\s*$/);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1; // the closing fence (or the end)
      const lang = fence[2] ? ` class="language-${escapeHtml(fence[2])}"` : '';
      out.push(`<pre><code${lang}>${escapeHtml(body.join('\n'))}</code></pre>`);
      continue;
    }
    if (/^\s*$/.test(line)) {
      i += 1;
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*?)\s*#*\s*$/);
    if (heading) {
      const level = heading[1].length;
      out.push(`<h${level}>${inline(heading[2])}</h${level}>`);
      i += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      out.push('<hr>');
      i += 1;
      continue;
    }
    if (/^\s*>/.test(line)) {
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) {
        quoted.push(lines[i].replace(/^\s*>\s?/, ''));
        i += 1;
      }
      out.push(`<blockquote>${renderMarkdown(quoted.join('\n'))}</blockquote>`);
      continue;
    }
    const listKind = listMarker(line);
    if (listKind) {
      // Items at this line's indent; a line indented past it (or a blank line before one)
      // belongs to the item above, rendered as blocks: nested lists and fenced code in items.
      const base = indentOf(line);
      const items = [];
      while (i < lines.length && listMarker(lines[i]) === listKind && indentOf(lines[i]) === base) {
        const marker = lines[i].match(/^\s*(?:[-*+]|\d{1,9}[.)])\s+/)[0].length;
        const body = [lines[i].slice(marker)];
        let loose = false;
        i += 1;
        while (i < lines.length) {
          if (/^\s*$/.test(lines[i])) {
            let next = i + 1;
            while (next < lines.length && /^\s*$/.test(lines[next])) next += 1;
            if (next >= lines.length || indentOf(lines[next]) <= base) break;
            loose = true;
            body.push('');
            i += 1;
            continue;
          }
          if (indentOf(lines[i]) <= base) break;
          body.push(lines[i].replace(new RegExp(`^ {0,${marker}}`), ''));
          i += 1;
        }
        let html = renderMarkdown(body.join('\n'));
        // A tight item's first paragraph is its text, not a <p>.
        if (!loose) html = html.replace(/^<p>([\s\S]*?)<\/p>\n?/, '$1');
        items.push(`<li>${html}</li>`);
        // Blank lines between two items of this list keep it one list.
        let next = i;
        while (next < lines.length && /^\s*$/.test(lines[next])) next += 1;
        if (next < lines.length && listMarker(lines[next]) === listKind && indentOf(lines[next]) === base) i = next;
      }
      out.push(listKind === 'ol' ? `<ol>${items.join('')}</ol>` : `<ul>${items.join('')}</ul>`);
      continue;
    }
    if (isTableStart(lines, i)) {
      const header = splitRow(lines[i]);
      i += 2;
      const rows = [];
      while (i < lines.length && lines[i].includes('|') && lines[i].trim() !== '') {
        rows.push(splitRow(lines[i]));
        i += 1;
      }
      const head = header.map((c) => `<th>${inline(c)}</th>`).join('');
      const body = rows.map((r) => `<tr>${r.map((c) => `<td>${inline(c)}</td>`).join('')}</tr>`).join('');
      out.push(`<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`);
      continue;
    }
    const para = [];
    while (
      i < lines.length &&
      !/^\s*$/.test(lines[i]) &&
      !/^\s*(```|~~~)/.test(lines[i]) &&
      !/^#{1,6}\s/.test(lines[i]) &&
      !/^\s*>/.test(lines[i]) &&
      !(para.length > 0 && listMarker(lines[i]))
    ) {
      para.push(lines[i]);
      i += 1;
    }
    out.push(`<p>${inline(para.join('\n')).replace(/\n/g, '<br>')}</p>`);
  }
  return out.join('\n');
}

/** The width of a line's leading white space (a tab counts as four). */
function indentOf(line) {
  const lead = line.match(/^[ \t]*/)[0];
  return lead.replace(/\t/g, '    ').length;
}

function listMarker(line) {
  if (/^\s{0,3}[-*+]\s+\S/.test(line)) return 'ul';
  if (/^\s{0,3}\d{1,9}[.)]\s+\S/.test(line)) return 'ol';
  return null;
}

function isTableStart(lines, i) {
  return (
    i + 1 < lines.length &&
    lines[i].includes('|') &&
    /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/.test(lines[i + 1])
  );
}

function splitRow(line) {
  return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
}

/** Inline Markdown on raw text: escapes everything, then adds code, emphasis and links. */
function inline(raw) {
  const codes = [];
  // Code spans are cut out before escaping so that nothing inside them is formatted.
  let text = String(raw).replace(/`([^`\n]+)`/g, (_, code) => {
    codes.push(`<code>${escapeHtml(code)}</code>`);
    return `${HOLE}${codes.length - 1}${HOLE}`;
  });
  text = escapeHtml(text);
  const links = [];
  const keepLink = (label, url) => {
    links.push(`<a href="${url}" target="_blank" rel="noopener noreferrer nofollow">${label}</a>`);
    return `${HOLE}L${links.length - 1}${HOLE}`;
  };
  // [label](http(s)://...) — the target was escaped above and must be http or https.
  text = text.replace(/\[([^\]\n]{1,500})\]\((https?:\/\/[^\s()<>]{1,2000})\)/gi, (_, label, url) =>
    keepLink(label, url),
  );
  // Bare http(s) URLs.
  text = text.replace(/(^|[\s(])(https?:\/\/[^\s<>()\u0000]{2,2000})/gi, (_, before, url) => {
    const trimmed = url.replace(/[.,;:!?]+$/, '');
    return before + keepLink(trimmed, trimmed) + url.slice(trimmed.length);
  });
  text = text
    .replace(/\*\*(?=\S)([^*\n]*?\S)\*\*/g, '<strong>$1</strong>')
    .replace(/(^|[^\w])__(?=\S)([^_\n]*?\S)__(?!\w)/g, '$1<strong>$2</strong>')
    .replace(/(^|[^*\w])\*(?=\S)([^*\n]*?\S)\*(?!\w)/g, '$1<em>$2</em>')
    .replace(/(^|[^_\w])_(?=\S)([^_\n]*?\S)_(?!\w)/g, '$1<em>$2</em>')
    .replace(/~~(?=\S)([^~\n]*?\S)~~/g, '<del>$1</del>');
  text = text.replace(/\u0000L(\d+)\u0000/g, (_, n) => links[Number(n)]);
  return text.replace(/\u0000(\d+)\u0000/g, (_, n) => codes[Number(n)]);
}
