// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/',
      'build/',
      'build-cmake/',
      'build-bench/',
      'build-test/',
      'build-fuzz/',
      'build-asan/',
      'node_modules/',
      'coverage/',
      '.scratch/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: { process: 'readonly', console: 'readonly' } },
    rules: {
      // src/core/native.ts holds the codebase's only `any`, with a reasoned disable.
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'always'],
      'no-console': 'off',
    },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } },
  },
  {
    // uWebSockets.js is reached through its typed wrapper only (src/proxy/server/uws.ts says why).
    files: ['src/**/*.ts', 'test/**/*.ts', 'examples/**/*.ts'],
    ignores: ['src/proxy/server/uws.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: [{ name: 'uWebSockets.js', message: 'import the typed wrapper src/proxy/server/uws.ts instead' }] },
      ],
    },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        fetch: 'readonly',
        URL: 'readonly',
        performance: 'readonly',
      },
    },
  },
);
