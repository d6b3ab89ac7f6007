"""trainlaunch's builtin components, shipped in the wheel next to the ``trainlaunch`` package.

Each public function returning an AppDef in a module here is the builtin ``module.function``
(``utils.echo``, ``dist.ddp``). ``trainlaunch.resolver`` lists them by reading these files with
``ast``; nothing here is imported until a component is used. See docs/components.md.
"""
