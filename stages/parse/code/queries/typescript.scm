; Definitions: classes, functions, methods, top-level arrow/function constants.
(class_declaration name: (_) @name) @definition.class
(class name: (_) @name) @definition.class
(abstract_class_declaration name: (_) @name) @definition.class
(interface_declaration name: (_) @name) @definition.interface
(enum_declaration name: (_) @name) @definition.enum
(internal_module name: (_) @name) @definition.namespace
(module name: (_) @name) @definition.namespace
(abstract_method_signature name: (_) @name) @definition.function
(function_declaration name: (_) @name) @definition.function
(generator_function_declaration name: (_) @name) @definition.function
(method_definition name: (_) @name) @definition.function
(lexical_declaration (variable_declarator name: (identifier) @name
  value: [(arrow_function body: (_) @body) (function_expression body: (_) @body)])) @definition.function
(export_statement "default" @name (class !name body: (_)) @definition.class)
; Imports: ES modules, re-exports, dynamic import(), require().
(import_statement source: (string (string_fragment) @import.import))
(export_statement source: (string (string_fragment) @import.import))
(call_expression function: (import) arguments: (arguments (string (string_fragment) @import.import)))
(call_expression function: (identifier) @_f arguments: (arguments . (string (string_fragment) @import.require))
  (#eq? @_f "require"))
