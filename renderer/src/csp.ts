// Imported first by main.tsx, so it runs before any module that builds or parses a schema:
// zod must never probe for eval (`new Function`), which the console's CSP forbids and would
// report as a violation even though zod catches the error.
import { z } from 'zod';

z.config({ jitless: true });
