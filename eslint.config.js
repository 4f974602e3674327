// ESLint for the library, the command, the tests and the tools: typescript-eslint's recommended
// rules, without type information (fast enough for every `npm test`).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'docs/api/', 'test/consumer/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // Typed events are declared by merging an interface of listener overloads with its class
      // (Node's stream typings take no events map); the merge is the point there.
      '@typescript-eslint/no-unsafe-declaration-merging': 'off',
      // A listener of any event takes `...args: any[]`, as Node's own typings say.
      '@typescript-eslint/no-explicit-any': ['error', { ignoreRestArgs: true }],
      // A closure may read a binding assigned once after it (a timer, a server's relay).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // `_name` marks a parameter kept for its position; `const { a, ...rest } = x` leaves `a` out of `rest`.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // Tests and benches read JSON answers of the emulator's control endpoint field by field.
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
);
