// Whether a chat template takes a message's content as a list of parts (OpenAI's format:
// `{% for part in message['content'] %}`) or as one string (Phi-3-vision's
// `{{ message['content'] }}`), found as the gateway finds it: its AST detector
// (crates/tokenizer/src/chat_template.rs, detect_chat_template_content_format, itself SGLang's
// detect_jinja_template_content_format) walked over @huggingface/jinja's AST. A string
// template gets each message's parts flattened (prompt.ts): the images' placeholders first,
// then the texts, joined by newlines, as the gateway and vLLM write them.
import type { Template } from '@huggingface/jinja';

export type ContentFormat = 'openai' | 'string';

/** The AST as @huggingface/jinja builds it, read structurally (its classes are not exported). */
interface Node {
  type: string;
  [key: string]: unknown;
}

const node = (x: unknown): Node | undefined => (x && typeof x === 'object' && typeof (x as Node).type === 'string' ? (x as Node) : undefined);
const isIdentifier = (x: unknown, name: string) => node(x)?.type === 'Identifier' && node(x)!.value === name;
const isString = (x: unknown, value: string) => node(x)?.type === 'StringLiteral' && node(x)!.value === value;
const isNumber = (x: unknown) => node(x)?.type === 'IntegerLiteral' || node(x)?.type === 'FloatLiteral';
const statements = (x: unknown): Node[] => (Array.isArray(x) ? x.flatMap((s) => node(s) ?? []) : []);

/** `<var>.content` or `<var>['content']`, through filters and tests wrapping it. */
function isVarContent(expr: unknown, name: string): boolean {
  const e = node(expr);
  if (!e) return false;
  if (e.type === 'MemberExpression')
    return isIdentifier(e.object, name) && (e.computed ? isString(e.property, 'content') : isIdentifier(e.property, 'content'));
  if (e.type === 'FilterExpression' || e.type === 'TestExpression') return isVarContent(e.operand, name);
  return false;
}

class Detector {
  private readonly scope: string[] = [];
  iteration = false;
  structure = false;
  macro = false;

  /** `<message>.content` of a message loop variable in scope, or anything below it (`message.content.parts`). */
  private scopeContent(expr: unknown): boolean {
    for (let e = node(expr); e; e = e.type === 'MemberExpression' ? node(e.object) : undefined) if (this.scope.some((v) => isVarContent(e, v))) return true;
    return false;
  }

  walk(stmt: Node): void {
    switch (stmt.type) {
      case 'Program':
        for (const s of statements(stmt.body)) this.walk(s);
        return;
      case 'For': {
        // {% for message in messages %}: its variable is a message.
        const pushed = isIdentifier(stmt.iterable, 'messages') && node(stmt.loopvar)?.type === 'Identifier';
        if (pushed) this.scope.push(node(stmt.loopvar)!.value as string);
        // Iterating over a message's content, or a local `content`: parts.
        if (this.scopeContent(stmt.iterable) || isIdentifier(stmt.iterable, 'content')) this.iteration = true;
        for (const s of statements(stmt.body)) this.walk(s);
        if (pushed) this.scope.pop();
        return;
      }
      case 'If':
        this.inspect(stmt.test);
        for (const s of [...statements(stmt.body), ...statements(stmt.alternate)]) this.walk(s);
        return;
      case 'Macro': {
        // A macro that tests a type and loops (render_content(content): string or parts).
        const seen = { test: false, loop: false };
        scanMacro(statements(stmt.body), seen);
        if (seen.test && seen.loop) this.macro = true;
        return;
      }
      default:
        // An expression statement is output ({{ ... }}).
        if (!['Set', 'Comment', 'Break', 'Continue', 'CallStatement', 'FilterStatement'].includes(stmt.type)) this.inspect(stmt);
    }
  }

  /** `content[0]`, `message.content|length`: the template reads the content as a list. */
  private inspect(expr: unknown): void {
    const e = node(expr);
    if (!e || this.structure) return;
    switch (e.type) {
      case 'MemberExpression':
        // `x[...]` (minijinja's GetItem) counts only with a number after content, and is not
        // looked into otherwise; `x.name` (GetAttr) is looked into.
        if (e.computed) {
          if (isNumber(e.property) && (isIdentifier(e.object, 'content') || this.scopeContent(e.object))) this.structure = true;
        } else this.inspect(e.object);
        return;
      case 'FilterExpression': {
        const filter = node(e.filter);
        const name = filter?.type === 'Identifier' ? filter.value : filter?.type === 'CallExpression' ? node(filter.callee)?.value : undefined;
        if (name === 'length') {
          if (isIdentifier(e.operand, 'content') || this.scopeContent(e.operand)) this.structure = true;
        } else this.inspect(e.operand);
        return;
      }
      case 'TestExpression':
        this.inspect(e.operand);
        return;
      case 'BinaryExpression':
        this.inspect(e.left);
        this.inspect(e.right);
        return;
      case 'UnaryExpression':
        this.inspect(e.argument);
        return;
    }
  }
}

function scanMacro(body: Node[], seen: { test: boolean; loop: boolean }): void {
  for (const s of body) {
    if (seen.test && seen.loop) return;
    if (s.type === 'If') {
      // `x is string`, not `x is not string` (minijinja's Not around the test).
      if (node(s.test)?.type === 'TestExpression' && node(s.test)!.negate !== true) seen.test = true;
      scanMacro([...statements(s.body), ...statements(s.alternate)], seen);
    } else if (s.type === 'For') {
      seen.loop = true;
      scanMacro(statements(s.body), seen);
    }
  }
}

/** The content format a parsed chat template takes (a template that assigns `content = message.content` and only tests `is string` takes strings). */
export function chatTemplateContentFormat(template: Template): ContentFormat {
  const d = new Detector();
  d.walk(template.parsed as unknown as Node);
  return d.iteration || d.structure || d.macro ? 'openai' : 'string';
}
