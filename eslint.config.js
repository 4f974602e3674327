// ESLint for the library, the command, the tests and the tools: typescript-eslint's recommended
// rules, without type information (fast enough for every `npm test`).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const PRIVATE_MEMBERS = [
  { selector: "PropertyDefinition[accessibility='private']", message: 'Use a #private field.' },
  { selector: "MethodDefinition[accessibility='private'][kind!='constructor']", message: 'Use a #private method.' },
  { selector: "TSParameterProperty[accessibility='private']", message: 'Use a #private field assigned in the constructor.' },
];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'docs/api/', 'test/consumer/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // A listener of any event takes `...args: any[]`, as Node's own typings say.
      '@typescript-eslint/no-explicit-any': ['error', { ignoreRestArgs: true }],
      // A closure may read a binding assigned once after it (a timer, a server's relay).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // `_name` marks a parameter kept for its position; `const { a, ...rest } = x` leaves `a` out of `rest`.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // `interface DubResource extends ResourceOf<...> {}` gives a computed type a name the reference shows.
      '@typescript-eslint/no-empty-object-type': ['error', { allowInterfaces: 'with-single-extends' }],
    },
  },
  {
    files: ['lib/**/*.ts', 'bin/**/*.ts'],
    rules: {
      // One kind of private member: `#name`, private at run time too (a `private constructor`
      // stays: a constructor cannot be `#`). In lib/, every throw is one of the library's typed
      // errors (lib/errors.ts), with a code callers can test.
      'no-restricted-syntax': ['error', ...PRIVATE_MEMBERS],
    },
  },
  {
    files: ['lib/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        ...PRIVATE_MEMBERS,
        {
          selector: 'ThrowStatement > NewExpression[callee.name=/^(Error|TypeError|RangeError|SyntaxError)$/]',
          message: 'Throw one of the typed errors of lib/errors.ts (ValidationError, UsageError, ...).',
        },
      ],
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
