// JSON request bodies (admin API, login, model-set activation) checked against their TypeBox
// schema: every issue in one FastAPI-style 422, as packets are. Here, below admin/ and auth/,
// because both parse bodies with it.

import type { Static, TSchema } from '@sinclair/typebox';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/compiler';
import { ValidationFailure } from '../errors/index.ts';
import { addSchemaErrors, IssueList, pathToLoc } from './issues.ts';
import { compileCodePoints } from './lengths.ts';
import { NAME_TEXT, NAME_TEXT_RULE } from './name-text.ts';

export type Parser<T extends TSchema> = (body: unknown) => Static<T>;

/** Compiles a body schema once; the parser throws a 422 with every issue, loc under "body".
 * The schemas are the ones the OpenAPI document is built from; string lengths are counted in
 * code points, as that document's minLength/maxLength mean (lengths.ts). */
export function bodyParser<T extends TSchema>(schema: T): Parser<T> {
  const check = compileCodePoints(schema);
  return (body) => {
    if (check.Check(body)) return body;
    const issues = new IssueList();
    if (body === undefined) issues.issue(['body'], 'missing', 'Field required');
    else addSchemaErrors(nameTextIssues(check.Errors(body), body, issues), ['body'], body, issues);
    if (issues.length === 0) issues.issue(['body'], 'model_type', 'Input does not match the schema');
    // a rejected password is still a password: never echo it back
    for (const item of issues.items) if (item.loc[item.loc.length - 1] === 'password') delete item.input;
    throw new ValidationFailure(issues.items);
  };
}

/** Reports a name that is not text the way pydantic reports a string that is not valid
 * Unicode; passes every other error on. */
function* nameTextIssues(errors: Iterable<ValueError>, body: unknown, issues: IssueList): Iterable<ValueError> {
  for (const e of errors) {
    if (e.type === ValueErrorType.StringFormat && (e.schema as { format?: string }).format === NAME_TEXT) {
      issues.issue(pathToLoc(['body'], e.path, body), 'string_unicode', `Input should be well-formed Unicode ${NAME_TEXT_RULE}`);
    } else if (e.type === ValueErrorType.StringPattern && (e.schema as { format?: string }).format === NAME_TEXT) {
      // the pattern states the format's control-character rule for clients (issue 29): one
      // fault, reported once, by the format above
    } else yield e;
  }
}
