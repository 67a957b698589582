// Which chat templates take a message's content as a string (Phi-3-vision's) and which as a
// list of parts (Qwen's, LLaVA's, Kimi's), told apart as the gateway's detector tells them
// (chat_template.rs, detect_chat_template_content_format): a string template gets each
// message's parts flattened, images first (prompt.ts).
import { Template } from '@huggingface/jinja';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeFamilyModel, type TestFamilyModel } from '../test/family-models.ts';
import { chatTemplateContentFormat } from './content-format.ts';
import { loadModelDirectory } from './model-dir.ts';

const scratch = mkdtempSync(path.join(tmpdir(), 'mmtc-content-format-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const format = (source: string) => chatTemplateContentFormat(new Template(source));

describe('the content format of a chat template', () => {
  it.each<[TestFamilyModel, 'openai' | 'string']>([
    ['qwen3_5', 'openai'],
    ['llava', 'openai'],
    ['kimi_k25', 'openai'],
    ['phi3_v', 'string'],
  ])('%s: %s', async (kind, expected) => {
    const model = await loadModelDirectory(makeFamilyModel(path.join(scratch, kind), kind));
    expect(model.contentFormat).toBe(expected);
  });

  it.each<[string, string, 'openai' | 'string']>([
    ['content written whole', "{% for message in messages %}{{ message['content'] }}{% endfor %}", 'string'],
    ['a loop over message.content', '{% for m in messages %}{% for part in m.content %}{{ part.text }}{% endfor %}{% endfor %}', 'openai'],
    [
      'a string test beside a loop (Llama 3.1)',
      "{% for message in messages %}{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for c in message['content'] %}{{ c['text'] }}{% endfor %}{% endif %}{% endfor %}",
      'openai',
    ],
    [
      'content assigned and tested, never iterated (Qwen3 text)',
      '{% for message in messages %}{% set content = message.content %}{% if content is string %}{{ content }}{% endif %}{% endfor %}',
      'string',
    ],
    ['message.content[0].text', '{% for message in messages %}{{ message.content[0].text }}{% endfor %}', 'openai'],
    // As the gateway reads it: a subscript by name is not looked into (minijinja's GetItem).
    ["message['content'][0]['text']", "{% for message in messages %}{{ message['content'][0]['text'] }}{% endfor %}", 'string'],
    ['message.content|length', '{% for message in messages %}{% if message.content|length > 1 %}x{% endif %}{% endfor %}', 'openai'],
    [
      'a macro that tests a type and loops',
      '{% macro render(c) %}{% if c is string %}{{ c }}{% else %}{% for p in c %}{{ p.text }}{% endfor %}{% endif %}{% endmacro %}{% for m in messages %}{{ render(m.content) }}{% endfor %}',
      'openai',
    ],
    [
      'a macro whose only test is negated (minijinja: Not around the test)',
      '{% macro render(c) %}{% if c is not string %}{% for p in c %}{{ p.text }}{% endfor %}{% endif %}{% endmacro %}{% for m in messages %}{{ render(m.content) }}{% endfor %}',
      'string',
    ],
    [
      'a loop over another list of the message',
      '{% for m in messages %}{% for t in m.tool_calls %}{{ t.name }}{% endfor %}{{ m.content }}{% endfor %}',
      'string',
    ],
  ])('%s: %s', (_, source, expected) => {
    expect(format(source)).toBe(expected);
  });
});
