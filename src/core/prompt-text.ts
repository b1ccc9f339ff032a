/**
 * The canonical text of a chat prompt, which the router hashes into block ids
 * (docs/hashing.md). Messages are serialised in order, each as
 *   RS role US content [US "name=" name] [US "tool_call_id=" id] [US JSON(tool_calls)]
 * with RS = U+001E and US = U+001F, and content parts joined by US (text parts
 * as their text, any other part as its JSON). An agent resends its history
 * unchanged, so a conversation's earlier turns keep their bytes, and therefore
 * their block ids, as later turns append to it.
 */
import type { ChatMessage } from './types.js';
import { checkObject, checkString } from './validate.js';
import { invalidType } from './errors.js';

const RS = '\u001e';
const US = '\u001f';

function contentText(field: string, content: unknown): string {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalidType(field, 'a string, an array of parts or null', content);
  return content
    .map((part: unknown) => {
      const p = part as { type?: unknown; text?: unknown } | null;
      return p !== null && typeof p === 'object' && p.type === 'text' && typeof p.text === 'string'
        ? p.text
        : JSON.stringify(part);
    })
    .join(US);
}

export function promptText(messages: readonly ChatMessage[], field = 'messages'): string {
  if (!Array.isArray(messages)) throw invalidType(field, 'an array of messages', messages);
  let text = '';
  for (let i = 0; i < messages.length; i += 1) {
    const m = checkObject(`${field}[${i}]`, messages[i]);
    text += RS + checkString(`${field}[${i}].role`, m.role) + US + contentText(`${field}[${i}].content`, m.content);
    if (m.name !== undefined) text += `${US}name=${checkString(`${field}[${i}].name`, m.name)}`;
    if (m.tool_call_id !== undefined) {
      text += `${US}tool_call_id=${checkString(`${field}[${i}].tool_call_id`, m.tool_call_id)}`;
    }
    if (m.tool_calls !== undefined && m.tool_calls !== null) text += US + JSON.stringify(m.tool_calls);
  }
  return text;
}
